"""ServerConfig: TOML, then GNNSTORE_* variables, then flags; unknown keys and file secrets refused."""
from __future__ import annotations

from pathlib import Path

import pytest

from gnnstore.common.errors import CommandInputError, InvalidRequestError
from gnnstore.config import ServerConfig, load_config


def test_defaults_bind_locally_with_a_large_message_limit() -> None:
    config = load_config()
    assert config.host == "127.0.0.1"
    assert config.max_message_bytes >= 256 << 20
    assert config.graph_backend == "embedded"


def test_flags_override_environment_which_overrides_the_file(tmp_path: Path) -> None:
    file = tmp_path / "server.toml"
    file.write_text('port = 7000\nhost = "0.0.0.0"\nworkers = 3\ndata_dir = "/data/a"\n')
    env = {"GNNSTORE_PORT": "7001", "GNNSTORE_WORKERS": "5", "GNNSTORE_CACHE": "/ignored"}
    config = load_config(file, env, {"port": 7002, "host": None})
    assert config.port == 7002  # flag
    assert config.workers == 5  # environment
    assert config.host == "0.0.0.0"  # file (the flag was not given)
    assert config.data_dir == Path("/data/a")


def test_environment_names_match_the_documented_ones() -> None:
    env = {
        "GNNSTORE_DATA_DIR": "/d",
        "GNNSTORE_HOST": "::1",
        "GNNSTORE_PORT": "0",
        "GNNSTORE_GRAPH_BACKEND": "neo4j",
        "GNNSTORE_NEO4J_URI": "bolt://db:7687",
        "GNNSTORE_NEO4J_USER": "reader",
        "GNNSTORE_NEO4J_PASSWORD": "s3cret",
        "GNNSTORE_READ_ONLY": "true",
    }
    config = load_config(None, env)
    assert (config.data_dir, config.host, config.port) == (Path("/d"), "::1", 0)
    assert (config.graph_backend, config.neo4j_uri, config.neo4j_user) == ("neo4j", "bolt://db:7687", "reader")
    assert config.neo4j_password == "s3cret" and config.read_only
    assert "s3cret" not in repr(config)


def test_unknown_key_in_the_file_is_an_error(tmp_path: Path) -> None:
    file = tmp_path / "server.toml"
    file.write_text("prot = 1\n")
    with pytest.raises(InvalidRequestError, match=r"unknown key 'prot'"):
        load_config(file)


def test_secrets_are_refused_in_the_file_and_in_flags(tmp_path: Path) -> None:
    file = tmp_path / "server.toml"
    file.write_text('neo4j_password = "x"\n')
    with pytest.raises(InvalidRequestError, match="GNNSTORE_NEO4J_PASSWORD"):
        load_config(file)
    with pytest.raises(InvalidRequestError, match="GNNSTORE_NEO4J_PASSWORD"):
        load_config(None, {}, {"neo4j_password": "x"})


def test_malformed_toml_names_the_file(tmp_path: Path) -> None:
    file = tmp_path / "server.toml"
    file.write_text("port = = 1\n")
    with pytest.raises(CommandInputError, match="server.toml is not TOML"):
        load_config(file)
    file.write_bytes(b"\xff\xfe port = 1")
    with pytest.raises(CommandInputError, match="server.toml cannot be read: not UTF-8 text"):
        load_config(file)


@pytest.mark.parametrize(
    "env, fragment",
    [
        ({"GNNSTORE_PORT": "http"}, "GNNSTORE_PORT: 'http' is not a valid int"),
        ({"GNNSTORE_PORT": "70000"}, "port must be in 0..65535"),
        ({"GNNSTORE_MAX_MESSAGE_BYTES": "1000"}, "at least 268435456"),
        ({"GNNSTORE_GRAPH_BACKEND": "sqlite"}, "graph_backend must be one of"),
        ({"GNNSTORE_BULK_SAMPLE_EDGES": "-1"}, "bulk_sample_edges must be >= 0, got -1"),
        ({"GNNSTORE_RESIDENT_FEATURE_BYTES": "-1"}, "resident_feature_bytes must be >= 0, got -1"),
        ({"GNNSTORE_READ_ONLY": "maybe"}, "not a valid bool"),
        ({"GNNSTORE_REPLICA": "true", "GNNSTORE_MAX_LAG_S": "0.1"}, "max_lag_s must be 0.2 to 3600 seconds, got 0.1"),
        ({"GNNSTORE_REPLICA": "true", "GNNSTORE_MAX_LAG_S": "nan"}, "max_lag_s must be 0.2 to 3600 seconds"),
        ({"GNNSTORE_REPLICA": "true", "GNNSTORE_MAX_LAG_S": "7200"}, "max_lag_s must be 0.2 to 3600 seconds"),
    ],
)
def test_bad_values_name_their_source(env: dict[str, str], fragment: str) -> None:
    with pytest.raises(InvalidRequestError, match=fragment):
        load_config(None, env)


def test_config_is_frozen() -> None:
    config = ServerConfig()
    with pytest.raises(AttributeError):
        config.port = 1  # type: ignore[misc]
