"""A minimal GGUF (v2/v3) reader for the tests that write hostile or broken model files: where each
metadata value and each tensor's data lie in the file, so a test can patch them in place. Standard
library only (the `gguf` pip package is not a test dependency)."""
import struct

SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
STRING, ARRAY = 8, 9
F32 = 0


class GgufFile:
    def __init__(self, data):
        self.data = data
        self.pos = 0
        magic = data[:4]
        if magic != b"GGUF":
            raise ValueError("not a GGUF file")
        self.pos = 4
        self.version = self._u32()
        num_tensors, num_kv = self._u64(), self._u64()
        self.kv = {}  # key -> (type, offset of the value, value for scalars and strings)
        for _ in range(num_kv):
            key = self._str()
            vtype = self._u32()
            offset = self.pos
            self.kv[key] = (vtype, offset, self._value(vtype))
        alignment = self.kv.get("general.alignment", (4, 0, 32))[2]
        infos = []
        for _ in range(num_tensors):
            name = self._str()
            dims = [self._u64() for _ in range(self._u32())]
            ttype = self._u32()
            infos.append((name, dims, ttype, self._u64()))
        self.infos_end, self.alignment = self.pos, alignment
        data_start = (self.pos + alignment - 1) // alignment * alignment
        self.data_start = data_start
        self.tensors = {name: (dims, ttype, data_start + off) for name, dims, ttype, off in infos}

    def _u32(self):
        (v,) = struct.unpack_from("<I", self.data, self.pos)
        self.pos += 4
        return v

    def _u64(self):
        (v,) = struct.unpack_from("<Q", self.data, self.pos)
        self.pos += 8
        return v

    def _str(self):
        n = self._u64()
        s = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return s.decode("utf-8", "replace")

    def _value(self, vtype):
        if vtype == STRING:
            return self._str()
        if vtype == ARRAY:
            etype, count = self._u32(), self._u64()
            for _ in range(count):
                self._value(etype)
            return None
        fmt = SCALAR[vtype]
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v


def with_f32_tensor_filled(src_path, dst_path, tensor, value):
    """Copies a model, every element of the F32 tensor `tensor` set to `value` (NaN, inf...)."""
    data = bytearray(open(src_path, "rb").read())
    dims, ttype, offset = GgufFile(data).tensors[tensor]
    if ttype != F32:
        raise ValueError(f"{tensor} is not F32")
    count = 1
    for d in dims:
        count *= d
    struct.pack_into(f"<{count}f", data, offset, *([value] * count))
    open(dst_path, "wb").write(data)


def with_uint_value(src_path, dst_path, key, value):
    """Copies a model with the unsigned integer metadata `key` set to `value` (same width, in place)."""
    data = bytearray(open(src_path, "rb").read())
    vtype, offset, _ = GgufFile(data).kv[key]
    struct.pack_into(SCALAR[vtype], data, offset, value)
    open(dst_path, "wb").write(data)


def with_string_value(src_path, dst_path, key, value):
    """Copies a model with the string metadata `key` set to `value` (any length: the metadata after
    it moves, the tensor data is re-aligned; tensor offsets are relative to the data, unchanged)."""
    data = open(src_path, "rb").read()
    g = GgufFile(data)
    vtype, offset, _ = g.kv[key]
    if vtype != STRING:
        raise ValueError(f"{key} is not a string")
    (old_len,) = struct.unpack_from("<Q", data, offset)
    encoded = value.encode("utf-8")
    head = data[:offset] + struct.pack("<Q", len(encoded)) + encoded + data[offset + 8 + old_len:g.infos_end]
    with open(dst_path, "wb") as f:
        f.write(head + b"\0" * (-len(head) % g.alignment) + data[g.data_start:])
