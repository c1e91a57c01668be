"""The config schema (workflow/schemas/config.schema.yaml): validation with one-line errors, defaults filled in,
and the schema's key order."""

import copy

import jsonschema
import yaml
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from tying.errors import PipelineError


def check_schema(config, schema_path):
    """Validate `config` against the schema alone (filling its defaults, in the schema's key order), or raise
    PipelineError naming the key and what is allowed."""
    schema = yaml.load(open(schema_path), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml's: 10x
    written = copy.deepcopy(config)  # validate fills in defaults as it goes: an error shows what the user wrote
    try:
        validate(config, schema_path)
    except WorkflowError:
        errors = jsonschema.Draft202012Validator(schema).iter_errors(written)
        raise PipelineError(_error_line(jsonschema.exceptions.best_match(errors), schema)) from None
    schema_order(config, schema)


def _error_line(error, root):
    """A schema error as one line: the config key, then what is wrong. A mapping that matches none of a oneOf's
    or anyOf's mappings (a model reference) is told the key none of them knows, else what the one whose
    required keys it has refuses, else that it is incomplete, beside the shapes it may take."""
    key = ".".join(map(str, error.absolute_path)) or "(top level)"
    options = (
        [_resolved(option, root) for option in error.schema.get(error.validator, [])]
        if error.validator in ("oneOf", "anyOf")
        else []
    )
    options = [option for option in options if "properties" in option]
    if not options or not isinstance(error.instance, dict):
        return f"{key}: {error.message}"
    shapes = ["{" + ", ".join(option["properties"]) + "}" for option in options]
    shapes = f"(keys: {', '.join(shapes[:-1])} or {shapes[-1]})" if len(shapes) > 1 else f"(keys: {shapes[0]})"
    unknown = [name for name in error.instance if not any(name in option["properties"] for option in options)]
    if unknown:
        return f"{key}: unknown key {unknown[0]!r} {shapes}"
    for option in options:
        if set(option.get("required", [])) <= set(error.instance):
            extra = [name for name in error.instance if name not in option["properties"]]
            if extra:
                return f"{key}: {extra[0]!r} is not a key of {{{', '.join(option['properties'])}}} {shapes}"
            own = jsonschema.Draft202012Validator({**option, "$defs": root.get("$defs", {})})
            inner = jsonschema.exceptions.best_match(own.iter_errors(error.instance))
            return f"{'.'.join([key, *map(str, inner.relative_path)])}: {inner.message}"
    return f"{key}: {{{', '.join(error.instance)}}} is incomplete {shapes}"


def schema_order(value, schema, root=None):
    """Put the keys of every mapping in `value` that the schema names (its `properties`) in the schema's order,
    in place; keys the user chooses (pairs, variants, ...) keep theirs. Snakemake compares a rule's params by
    their repr, which follows key order: without this, a section's keys moved about in a config file, or a
    default written out, would rerun every job that reads the section."""
    root = root or schema
    schema = _resolved(schema, root)
    if isinstance(value, dict):
        named = {}
        for option in [schema, *schema.get("oneOf", []), *schema.get("anyOf", [])]:
            named |= _resolved(option, root).get("properties", {})
        keys = [*(k for k in named if k in value), *(k for k in value if k not in named)]
        ordered = {key: value[key] for key in keys}
        value.clear()
        value.update(ordered)
        other = schema.get("additionalProperties")
        for key, item in value.items():
            sub = named.get(key, other if isinstance(other, dict) else None)
            if sub is not None:
                schema_order(item, sub, root)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            schema_order(item, schema["items"], root)


def _resolved(schema, root):
    """`schema`, or the `#/$defs/...` definition its $ref names."""
    ref = schema.get("$ref", "") if isinstance(schema, dict) else ""
    return root["$defs"][ref.removeprefix("#/$defs/")] if ref.startswith("#/$defs/") else schema
