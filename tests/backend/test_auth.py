"""Tokens and roles: the table every gnnstore method is in, and token entries that do not fit."""
from __future__ import annotations

from pathlib import Path

import pytest

from gnnstore.backend.service.auth import METHOD_ROLES, ROLES, Principal, TokenTable, parse_tokens, required_role
from gnnstore.common.errors import InvalidRequestError
from gnnstore.config import load_config
from gnnstore.proto import admin_pb2, feature_pb2, graph_pb2, idmap_pb2

TOKEN = "t0k3n-" + "x" * 20


def test_every_rpc_has_a_role_and_only_writes_need_writer() -> None:
    methods = {
        f"/{service.full_name}/{method.name}"
        for module in (admin_pb2, feature_pb2, graph_pb2, idmap_pb2)
        for service in module.DESCRIPTOR.services_by_name.values()
        for method in service.methods
    }
    assert methods == set(METHOD_ROLES)  # a new RPC must be given a role here
    writers = {m for m, role in METHOD_ROLES.items() if role == "writer"}
    assert writers == {
        "/gnnstore.v1.FeatureService/Put", "/gnnstore.v1.FeatureService/Remove", "/gnnstore.v1.GraphService/WriteGraph",
    }
    assert required_role("/gnnstore.v1.FeatureService/Truncate") == "admin"  # unknown: closed


def test_roles_nest() -> None:
    reader, writer, admin = (Principal(r, r) for r in ROLES)
    assert reader.may("reader") and not reader.may("writer") and not reader.may("admin")
    assert writer.may("reader") and writer.may("writer") and not writer.may("admin")
    assert admin.may("admin")


def test_entries_give_roles_and_names_without_showing_tokens() -> None:
    other = "another-" + "y" * 20
    entries = dict(parse_tokens(["# comment", "", f"{TOKEN} reader  # trailing", f"{other} admin ops"], "src"))
    assert entries[other] == Principal("ops", "admin")
    assert entries[TOKEN].role == "reader" and entries[TOKEN].name.startswith("reader-")
    assert TOKEN not in entries[TOKEN].name


@pytest.mark.parametrize(
    "line, message",
    [
        (f"{TOKEN}", "expected 'token role \\[name\\]', got 1 fields"),
        (f"{TOKEN} root", "role 'root' is not one of reader, writer, admin"),
        ("short reader", "a token must be at least 16 printable ASCII characters"),
        (f"{TOKEN} reader a b", "expected .*, got 4 fields"),
    ],
)
def test_an_entry_that_does_not_fit_is_named_by_number_not_by_token(line: str, message: str) -> None:
    with pytest.raises(InvalidRequestError, match=f"src entry 2: {message}") as refused:
        parse_tokens([f"{'z' * 16} reader", line], "src")
    assert TOKEN not in str(refused.value) and "short" not in str(refused.value)


def test_a_token_listed_twice_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequestError, match="entry 2: the same token is listed twice"):
        parse_tokens([f"{TOKEN} reader", f"{TOKEN} admin"], "src")
    auth_file = tmp_path / "tokens"
    auth_file.write_text(f"{TOKEN} admin\n")
    with pytest.raises(InvalidRequestError, match="both in"):
        TokenTable(auth_file, f"{TOKEN} reader")


def test_only_a_known_bearer_token_authenticates(tmp_path: Path) -> None:
    auth_file = tmp_path / "tokens"
    auth_file.write_text(f"{TOKEN} writer w\n")
    table = TokenTable(auth_file, "env-token-0123456789 reader r")
    assert table.authenticate([("authorization", f"Bearer {TOKEN}")]) == Principal("w", "writer")
    assert table.authenticate([("authorization", "bearer env-token-0123456789")]) == Principal("r", "reader")
    for metadata in ([], None, [("authorization", TOKEN)], [("authorization", f"Basic {TOKEN}")],
                     [("authorization", f"Bearer {TOKEN}x")], [("x-token", TOKEN)]):
        assert table.authenticate(metadata) is None


def test_the_token_entries_come_only_from_the_environment(tmp_path: Path) -> None:
    config_file = tmp_path / "server.toml"
    config_file.write_text(f'auth_tokens = "{TOKEN} admin"\n')
    with pytest.raises(InvalidRequestError, match="must not be written in a file") as refused:
        load_config(config_file)
    assert TOKEN not in str(refused.value)
    with pytest.raises(InvalidRequestError, match="comes only from \\$GNNSTORE_AUTH_TOKENS"):
        load_config(None, {}, {"auth_tokens": f"{TOKEN} admin"})
    config = load_config(None, {"GNNSTORE_AUTH_TOKENS": f"{TOKEN} admin"}, {})
    assert config.auth_tokens == f"{TOKEN} admin" and TOKEN not in repr(config)


def test_tls_settings_come_together() -> None:
    with pytest.raises(InvalidRequestError, match="tls_cert and tls_key come together"):
        load_config(None, {}, {"tls_cert": "server.pem"})
    with pytest.raises(InvalidRequestError, match="needs tls_cert"):
        load_config(None, {}, {"tls_client_ca": "ca.pem"})
