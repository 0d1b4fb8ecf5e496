"""A typed client generated from a committed OpenAPI document, as a user would generate it
(``openapi-python-client``, the command docs/reference/api.md gives), and the checks that
each of its calls parsed into the documented model.

Nothing is cached: each test generates its client into its own ``tmp_path`` and imports it
under a package name of its own.
"""

from __future__ import annotations

import datetime
import importlib
import inspect
import os
import re
import subprocess
import sys
import types
import typing
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs
import yaml

GENERATOR = Path(sys.executable).with_name("openapi-python-client")
REPOSITORY = Path(__file__).resolve().parent.parent
METHODS = ("get", "post", "put", "patch", "delete")

# What the generator leaves out of our documents, each for a limitation of its own: it
# generates request bodies for JSON, forms, multipart and application/octet-stream only
# (its README, "content_type_overrides"), and maps any other type to a file upload, which
# a YAML text body is not. The JSON body of the same operation is generated.
KNOWN_WARNINGS = {("POST /api/v1/catalog/apply", "Unsupported content type application/yaml")}
# Models open by design: an RFC 9457 problem carries members specific to its type
# (``expected_format``, ``suggestion``, ...), as the Problem schema says.
OPEN_MODELS = {"Problem"}
WARNING = re.compile(r"^WARNING parsing (?P<where>\S+ \S+) within \S+\.\n\n(?P<what>.+)$", re.M)


@dataclass(frozen=True)
class Operation:
    """One operation of the document: ``method`` in upper case, ``path`` as documented,
    ``responses`` as the document's responses object."""

    method: str
    path: str
    operation_id: str
    tag: str
    responses: dict

    @property
    def path_parameters(self) -> list[str]:
        return re.findall(r"{(\w+)}", self.path)

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


@dataclass
class GeneratedClient:
    """The generated package, imported, and the document it came from."""

    package: ModuleType
    operations: list[Operation]
    called: set[str] = field(default_factory=set)  # operation ids, by ``call``

    def module(self, operation: Operation) -> ModuleType:
        """The generated module of ``operation`` (``<package>.api.<tag>.<operationId>``)."""
        name = f"{self.package.__name__}.api.{operation.tag}.{operation.operation_id}"
        return importlib.import_module(name)

    def client(self, base_url: str, token: str | None = None):
        """A generated client that raises on any status the document does not give the
        operation (``raise_on_unexpected_status``); with ``token``, authenticated."""
        client = importlib.import_module(f"{self.package.__name__}.client")
        if token is None:
            return client.Client(base_url=base_url, raise_on_unexpected_status=True)
        return client.AuthenticatedClient(
            base_url=base_url, token=token, raise_on_unexpected_status=True
        )

    def model(self, name: str) -> type:
        return getattr(importlib.import_module(f"{self.package.__name__}.models"), name)

    def call(self, operation: Operation, client, *args, **kwargs):
        """``sync_detailed`` of ``operation``'s module; returns the generated ``Response``
        after checking that it parsed into what the document says for its status."""
        response = self.module(operation).sync_detailed(*args, client=client, **kwargs)
        self.check(operation, response)
        self.called.add(operation.operation_id)
        return response

    def check(self, operation: Operation, response) -> None:
        """Assert that ``response.parsed`` is the documented model for its status: a
        generated model class (or a list of them) for a JSON body, None for a body the
        document gives no schema; and that no object in it carries a field its model does
        not declare."""
        status = str(int(response.status_code))
        documented = operation.responses.get(status)
        assert documented is not None, f"{operation}: {status} is not documented"
        expected = _expected_type(documented)
        parsed = response.parsed
        if expected is None:
            assert parsed is None, f"{operation}: {status} parsed into {parsed!r}"
            return
        kind, name = expected
        model = self.model(name)
        if kind == "array":
            assert isinstance(parsed, list), f"{operation}: {status} parsed into {parsed!r}"
            assert all(isinstance(item, model) for item in parsed), (operation, parsed)
        else:
            assert isinstance(parsed, model), f"{operation}: {status} parsed into {parsed!r}"
        undeclared = list(_undeclared_fields(parsed, "body"))
        assert not undeclared, f"{operation}: served but not in the document: {undeclared}"
        mistyped = list(self._mistyped_fields(parsed, "body"))
        assert not mistyped, f"{operation}: served otherwise than typed: {mistyped}"

    def _mistyped_fields(self, value: Any, where: str):
        """Paths of the fields of generated models in ``value`` whose value is not of the
        field's annotated type. The generated ``from_dict`` only casts a plain field (a
        null served for a ``str`` field passes it), so this is what checks nullability."""
        if isinstance(value, list):
            for index, item in enumerate(value):
                yield from self._mistyped_fields(item, f"{where}[{index}]")
            return
        if not attrs.has(type(value)):
            return
        hints = self._hints(type(value))
        for attribute in attrs.fields(type(value)):
            if attribute.name == "additional_properties":
                continue
            field_value = getattr(value, attribute.name)
            if not _conforms(field_value, hints[attribute.name]):
                yield f"{where}.{attribute.name} = {field_value!r} (typed {hints[attribute.name]})"
            yield from self._mistyped_fields(field_value, f"{where}.{attribute.name}")

    def _hints(self, model: type) -> dict[str, Any]:
        # Nested models are imported by the generated modules only for type checkers.
        package = self.package.__name__
        names = {
            **vars(importlib.import_module(f"{package}.models")),
            **vars(importlib.import_module(f"{package}.types")),
            "datetime": datetime,
            "UUID": uuid.UUID,
        }
        return typing.get_type_hints(model, localns=names)


def generate(document: Path, into: Path, package: str) -> GeneratedClient:
    """Generate a client from ``document`` into ``into/package`` with the generator's
    command line (``--meta none``: a bare package) and import it. Fails on a generator
    error or on any warning not in ``KNOWN_WARNINGS``."""
    into.mkdir(parents=True, exist_ok=True)
    output = into / package
    env = {**os.environ, "PATH": f"{GENERATOR.parent}{os.pathsep}{os.environ['PATH']}"}
    run = subprocess.run(
        [
            *(str(GENERATOR), "generate", "--path", str(document)),
            *("--meta", "none", "--output-path", str(output)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=into,
    )
    log = run.stdout + run.stderr
    assert run.returncode == 0, log
    warnings = {(m["where"], m["what"].strip()) for m in WARNING.finditer(log)}
    if "Warning(s) encountered" in log:
        assert warnings, f"a warning this test cannot read:\n{log}"
    assert warnings <= KNOWN_WARNINGS, log
    sys.path.insert(0, str(into))
    try:
        imported = importlib.import_module(package)
    finally:
        sys.path.remove(str(into))
    return GeneratedClient(imported, operations(document))


def operations(document: Path) -> list[Operation]:
    """Every operation of ``document``, in the document's order."""
    spec = yaml.safe_load(document.read_text())
    found = []
    for path, item in spec["paths"].items():
        for method in METHODS:
            if method in item:
                operation = item[method]
                found.append(
                    Operation(
                        method=method.upper(),
                        path=path,
                        operation_id=operation["operationId"],
                        tag=operation["tags"][0],
                        responses=operation["responses"],
                    )
                )
    return found


def required_arguments(module: ModuleType) -> list[str]:
    """The names ``module.sync_detailed`` needs besides the client: path parameters,
    required query parameters and a required body."""
    signature = inspect.signature(module.sync_detailed)
    return [
        name
        for name, parameter in signature.parameters.items()
        if name != "client" and parameter.default is inspect.Parameter.empty
    ]


def _expected_type(response: dict) -> tuple[str, str] | None:
    """(``"object"`` or ``"array"``, the component's name) of a documented response's
    JSON body, or None when it has none."""
    for media_type, content in (response.get("content") or {}).items():
        if not media_type.endswith("json"):
            continue
        schema = content["schema"]
        if "$ref" in schema:
            return "object", schema["$ref"].rsplit("/", 1)[1]
        if schema.get("type") == "array" and "$ref" in schema["items"]:
            return "array", schema["items"]["$ref"].rsplit("/", 1)[1]
        raise AssertionError(f"a response schema this test cannot name: {schema}")
    return None


def _conforms(value: Any, hint: Any) -> bool:
    """Whether ``value`` is of the type ``hint`` (a generated model's annotation)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_conforms(value, arg) for arg in args)
    if origin is list:
        return isinstance(value, list) and all(_conforms(item, args[0]) for item in value)
    if origin is dict:
        return isinstance(value, dict)
    if hint is None or hint is type(None):
        return value is None
    if hint in (int, float):
        return isinstance(value, (int, float) if hint is float else int) and not isinstance(
            value, bool
        )
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True  # a typing form the generator does not use for fields


def _undeclared_fields(value: Any, where: str):
    """Paths of the fields of generated models in ``value`` that the model does not
    declare (kept in ``additional_properties``), for models that declare fields at all
    (a free-form object declares none, and holds everything there)."""
    if isinstance(value, list):
        for index, item in enumerate(value):
            yield from _undeclared_fields(item, f"{where}[{index}]")
    elif attrs.has(type(value)):
        declared = [a.name for a in attrs.fields(type(value)) if a.name != "additional_properties"]
        extra = getattr(value, "additional_properties", {})
        if declared and extra and type(value).__name__ not in OPEN_MODELS:
            yield f"{where} ({type(value).__name__}): {sorted(extra)}"
        for name in declared:
            yield from _undeclared_fields(getattr(value, name), f"{where}.{name}")
