#!/usr/bin/env python3
"""Writes tests/data/grammar/schemas.json: the JSON Schema suite of the structured-output tests
(e2e generation with the openai client, bench_grammar compile and mask timings). Hand-written,
covering nested objects, arrays, enums, refs (recursive too), optional fields, string formats,
patterns and numeric bounds."""
import json, pathlib

S = {"type": "string"}
I = {"type": "integer"}
N = {"type": "number"}
B = {"type": "boolean"}

def obj(props, required=None, **kw):
    d = {"type": "object", "properties": props}
    d["required"] = list(props) if required is None else required
    d.update(kw)
    return d

schemas = {
  "person": obj({"name": S, "age": I}),
  "person_optional": obj({"name": S, "age": I, "email": {"type": "string", "format": "email"}}, ["name"]),
  "bounded_age": obj({"name": {"type": "string", "maxLength": 24}, "age": {"type": "integer", "minimum": 0, "maximum": 120}}),
  "city_enum": obj({"city": {"enum": ["Paris", "Rome", "Berlin", "Madrid"]}, "population": {"type": "integer", "minimum": 0}}),
  "boolean_flags": obj({"active": B, "verified": B, "admin": B}),
  "nullable_field": obj({"nickname": {"type": ["string", "null"]}, "score": N}),
  "tags_array": obj({"title": S, "tags": {"type": "array", "items": S, "minItems": 1, "maxItems": 4}}),
  "matrix": obj({"rows": {"type": "array", "items": {"type": "array", "items": I, "maxItems": 3}, "maxItems": 3}}),
  "nested_address": obj({"name": S, "address": obj({"street": S, "city": S, "zip": {"type": "string", "pattern": "^[0-9]{5}$"}})}),
  "order": obj({"id": {"type": "string", "format": "uuid"}, "items": {"type": "array", "items": obj({"sku": S, "qty": {"type": "integer", "minimum": 1, "maximum": 99}}), "minItems": 1, "maxItems": 3}, "total": {"type": "number", "minimum": 0}}),
  "event_dates": obj({"event": S, "date": {"type": "string", "format": "date"}}),
  "timestamp": obj({"message": S, "at": {"type": "string", "format": "date-time"}}),
  "server": obj({"host": {"type": "string", "format": "hostname"}, "ip": {"type": "string", "format": "ipv4"}, "port": {"type": "integer", "minimum": 1, "maximum": 65535}}),
  "link": obj({"label": S, "url": {"type": "string", "format": "uri"}}),
  "const_version": obj({"version": {"const": 2}, "kind": {"const": "config"}, "debug": B}),
  "any_of_value": obj({"value": {"anyOf": [I, S, B]}}),
  "one_of_shape": obj({"shape": {"oneOf": [obj({"kind": {"const": "circle"}, "r": N}), obj({"kind": {"const": "square"}, "side": N})]}}),
  "refs_defs": {"$defs": {"point": obj({"x": I, "y": I})}, "type": "object", "properties": {"a": {"$ref": "#/$defs/point"}, "b": {"$ref": "#/$defs/point"}}, "required": ["a", "b"]},
  "recursive_tree": {"$defs": {"node": obj({"value": I, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}}, ["value"])}, "$ref": "#/$defs/node"},
  "linked_list": {"definitions": {"item": obj({"v": S, "next": {"anyOf": [{"$ref": "#/definitions/item"}, {"type": "null"}]}})}, "$ref": "#/definitions/item"},
  "map_of_ints": {"type": "object", "additionalProperties": I},
  "strict_empty_extra": obj({"a": I}, additionalProperties=False),
  "product": obj({"name": S, "price": {"type": "number", "minimum": 0, "maximum": 10000}, "currency": {"enum": ["USD", "EUR", "GBP"]}, "in_stock": B}),
  "rating": obj({"stars": {"type": "integer", "minimum": 1, "maximum": 5}, "comment": {"type": "string", "maxLength": 80}}),
  "temperature": obj({"celsius": {"type": "number", "minimum": -90, "maximum": 60}}),
  "short_code": obj({"code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2}$"}}),
  "phone": obj({"phone": {"type": "string", "pattern": "^\\+?[0-9]{7,12}$"}}),
  "color_hex": obj({"name": S, "hex": {"type": "string", "pattern": "^#[0-9a-f]{6}$"}}),
  "weekday_plan": obj({"day": {"enum": ["mon", "tue", "wed", "thu", "fri"]}, "tasks": {"type": "array", "items": S, "maxItems": 3}}),
  "book": obj({"title": S, "authors": {"type": "array", "items": S, "minItems": 1, "maxItems": 2}, "year": {"type": "integer", "minimum": 1450, "maximum": 2030}, "isbn": {"type": "string", "pattern": "^[0-9]{13}$"}}),
  "movie_review": obj({"movie": S, "score": {"type": "number", "minimum": 0, "maximum": 10}, "spoilers": B}, ["movie", "score"]),
  "coordinates": obj({"lat": {"type": "number", "minimum": -90, "maximum": 90}, "lon": {"type": "number", "minimum": -180, "maximum": 180}}),
  "user_profile": obj({"user": obj({"id": I, "handle": {"type": "string", "pattern": "^@[a-z0-9_]{3,12}$"}}), "settings": obj({"theme": {"enum": ["light", "dark"]}, "notifications": B})}),
  "inventory": obj({"warehouse": S, "stock": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}}}),
  "tuple_pair": obj({"pair": {"type": "array", "prefixItems": [S, I]}}),
  "string_lengths": obj({"first": {"type": "string", "minLength": 1, "maxLength": 8}, "last": {"type": "string", "minLength": 1, "maxLength": 8}}),
  "top_level_array": {"type": "array", "items": obj({"k": S, "v": I}), "minItems": 1, "maxItems": 3},
  "top_level_enum": {"enum": ["red", "green", "blue", 7, None, True]},
  "multi_type": obj({"x": {"type": ["integer", "boolean"]}}),
  "recipe": obj({"dish": S, "servings": {"type": "integer", "minimum": 1, "maximum": 12}, "ingredients": {"type": "array", "items": obj({"item": S, "grams": {"type": "integer", "minimum": 1, "maximum": 5000}}), "minItems": 1, "maxItems": 4}, "vegetarian": B}),
  "api_error": obj({"error": obj({"code": {"type": "integer", "minimum": 100, "maximum": 599}, "message": S, "retry": B}, ["code", "message"])}),
  "calendar_invite": obj({"title": S, "start": {"type": "string", "format": "date-time"}, "attendees": {"type": "array", "items": {"type": "string", "format": "email"}, "maxItems": 3}}),
  "exclusive_bounds": obj({"n": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10}}),
}
out = [{"name": k, "schema": v} for k, v in schemas.items()]
path = pathlib.Path(__file__).resolve().parent.parent / "tests/data/grammar/schemas.json"
path.write_text(json.dumps(out, indent=1) + "\n")
print(f"{len(out)} schemas -> {path}")
