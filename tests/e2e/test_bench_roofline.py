"""bench/bench_roofline.py's parts that need no llama.cpp: the README section it rewrites (and the
LOG.md entry the previous tables move to), the parsers of llama.cpp's tool outputs (lines in the
formats llama-bench -o json and llama-batched-bench --output-format jsonl print), the table cells,
and the bytes a decode step reads. The timing runs themselves need llama.cpp's native tools:
`python3 bench/bench_roofline.py --quick` (about 5 minutes) where they are built."""
import datetime
import os
import sys

import pytest

from conftest import SOURCE_DIR

sys.path.insert(0, os.path.join(SOURCE_DIR, "bench"))
import bench_roofline as roof  # noqa: E402

README = """# benchmarks

## B-roofline something
text before

<!-- roofline:begin -->
not yet run
<!-- roofline:end -->

## Kernels and probes
after
"""


def test_write_readme_fills_the_section_then_moves_the_old_tables_to_the_log(tmp_path):
    readme, log = tmp_path / "README.md", tmp_path / "LOG.md"
    readme.write_text(README)
    log.write_text("# journal\n")
    first = datetime.datetime(2026, 12, 7, 6, 5, tzinfo=datetime.timezone.utc)
    roof.write_readme("| a | b |\n| 1 | 2 |\n", str(readme), str(log), now=first)
    assert readme.read_text() == README.replace("not yet run", "| a | b |\n| 1 | 2 |")
    assert log.read_text() == "# journal\n"  # the placeholder is not history

    second = datetime.datetime(2026, 12, 8, 7, 30, tzinfo=datetime.timezone.utc)
    roof.write_readme("| c |", str(readme), str(log), now=second)
    assert readme.read_text() == README.replace("not yet run", "| c |")
    assert log.read_text() == ("# journal\n\n## 2026-12-08 B-roofline (issue 46), displaced by the run of "
                               "2026-12-08 07:30 UTC (README)\n\n| a | b |\n| 1 | 2 |\n")


def test_write_readme_refuses_a_file_without_the_markers(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# benchmarks\n")
    with pytest.raises(SystemExit, match="no <!-- roofline:begin -->"):
        roof.write_readme("| c |", str(readme), str(tmp_path / "LOG.md"))
    assert readme.read_text() == "# benchmarks\n"


def test_the_committed_readme_has_one_roofline_section():
    with open(os.path.join(SOURCE_DIR, "bench", "README.md")) as f:
        text = f.read()
    assert text.count(roof.BEGIN) == 1 and text.count(roof.END) == 1
    assert text.index(roof.BEGIN) < text.index(roof.END)
    assert "## B-roofline batched decode, 1.5B and serving vs llama.cpp's native tools (issue 46)" in text


def test_parse_llama_bench_json():
    text = ('[\n  {"build_commit": "0c1e570", "n_prompt": 512, "n_gen": 0, "avg_ts": 241.25},\n'
            '  {"build_commit": "0c1e570", "n_prompt": 0, "n_gen": 128, "avg_ts": 49.5}\n]\n')
    assert roof.parse_llama_bench(text) == {"prefill": 241.25, "decode": 49.5}
    assert roof.parse_llama_bench('[{"n_prompt": 0, "n_gen": 64, "avg_ts": 33.3}]') == {"decode": 33.3}


def test_parse_batched_bench_jsonl():
    row = ('{{"n_kv_max": 8192, "n_batch": 2048, "n_ubatch": 512, "flash_attn": -1, "is_pp_shared": 0, '
           '"n_gpu_layers": -1, "n_threads": 2, "n_threads_batch": 2, "pp": 128, "tg": 128, "pl": {pl}, '
           '"n_kv": {kv}, "t_pp": 0.5, "speed_pp": 256.0, "t_tg": 2.0, "speed_tg": {tg}, "t": 2.5, "speed": 100.0}}')
    text = "\n".join(["main: n_kv_max = 8192, n_batch = 2048", row.format(pl=1, kv=256, tg=41.57), "",
                      row.format(pl=16, kv=4096, tg=124.0), ""])
    assert roof.parse_batched_bench(text) == {1: 41.57, 16: 124.0}
    with pytest.raises(SystemExit, match="no result rows"):
        roof.parse_batched_bench("error: failed to create the llama_context\n")


def test_cells():
    assert roof.cell([3.0, 1.0, 2.0]) == "2.0 (1.0-3.0)"
    assert roof.cell([]) == "-"
    assert roof.ratio_cell([10.0, 30.0, 20.0], [5.0, 10.0, 10.0]) == "2.00x (2.00-3.00)"


def write_gguf(path, tensors):
    import numpy as np
    from gguf import GGUFWriter
    w = GGUFWriter(str(path), "llama")
    for name, shape in tensors.items():
        w.add_tensor(name, np.zeros(shape, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_weight_bytes_count_the_token_embedding_only_where_it_is_the_output(tmp_path):
    # f32: token_embd 16 x 8 = 512 bytes, a layer's 8 x 8 = 256, output 4 x 8 = 128.
    untied, tied = tmp_path / "untied.gguf", tmp_path / "tied.gguf"
    write_gguf(untied, {"token_embd.weight": (16, 8), "blk.0.attn_q.weight": (8, 8), "output.weight": (4, 8)})
    write_gguf(tied, {"token_embd.weight": (16, 8), "blk.0.attn_q.weight": (8, 8)})
    assert roof.weight_bytes(str(untied)) == 256 + 128
    assert roof.weight_bytes(str(tied)) == 512 + 256


def test_weight_bytes_of_the_default_model():
    # SmolLM2's output projection is its token embedding (no output.weight): every tensor counts.
    path = os.path.join(SOURCE_DIR, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
    if not os.path.exists(path):
        pytest.skip("the default model is missing (run scripts/setup.sh)")
    assert roof.weight_bytes(path) == 96576768
