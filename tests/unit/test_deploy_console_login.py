"""The deployments give the console its own database login and never the owner's (issue 40 item 3).

Kubernetes: the console's pods mount only the secret keys the console reads (not ``database-url``, the tables'
owner), and every ``*_FILE`` the console is given names one of them. Compose: the console connects as
``erasure_console``, made by a one-shot service after the migrations, with a password of its own.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
BASE = DEPLOY / "k8s" / "base"
MOUNT = "/etc/erasure/secrets"
CONSOLE_FILE = f"{MOUNT}/console-database-url"


def _k8s(kind: str, name: str) -> dict[str, Any]:
    for path in sorted(BASE.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == kind and doc["metadata"]["name"] == name:
                return dict(doc)
    raise AssertionError(f"no {kind} {name} in deploy/k8s/base")


def _secret_keys(overlay: str) -> set[str]:
    """The keys of the Secret the overlay generates from its files (one file per key)."""
    kustomization = yaml.safe_load((DEPLOY / "k8s" / "overlays" / overlay / "kustomization.yaml").read_text())
    (generator,) = [g for g in kustomization["secretGenerator"] if g["name"] == "erasure-secrets"]
    keys = set()
    for entry in map(str, generator["files"]):  # FILE, or KEY=FILE
        key, _, path = entry.rpartition("=")
        keys.add(key or Path(path).name)
    return keys


def _compose_services() -> dict[str, Any]:
    services: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]
    return services


def test_k8s_console_mounts_its_own_login_and_not_the_owners() -> None:
    pod = _k8s("Deployment", "erasure-console")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    (volume,) = [v for v in pod["volumes"] if v.get("secret", {}).get("secretName") == "erasure-secrets"]
    projected = {item["path"] for item in volume["secret"]["items"]}
    assert "database-url" not in projected  # the owner's URL never reaches the console's filesystem
    assert "console-database-url" in projected

    given = {
        **(_k8s("ConfigMap", "erasure-config")["data"]),
        **(_k8s("ConfigMap", "erasure-console-config")["data"]),
        **{e["name"]: str(e.get("value", "")) for e in container.get("env", [])},  # env wins over envFrom
    }
    assert given["ERASURE_CONSOLE_DATABASE_URL_FILE"] == CONSOLE_FILE
    assert given["ERASURE_DATABASE_URL_FILE"] == CONSOLE_FILE
    files = {name: path for name, path in given.items() if name.endswith("_FILE") and path.startswith(MOUNT + "/")}
    missing = {name: path for name, path in files.items() if path.removeprefix(MOUNT + "/") not in projected}
    assert not missing, f"the console is told to read files its pods do not mount: {missing}"

    for overlay in ("local", "production"):
        assert projected <= _secret_keys(overlay), overlay


def test_compose_console_connects_as_its_own_login_made_after_the_migrations() -> None:
    services = _compose_services()
    console_env = services["console"]["environment"]
    owner = re.match(r"postgresql://([^:]+):", services["setup"]["environment"]["ERASURE_DATABASE_URL"])
    assert owner is not None
    for var in ("ERASURE_CONSOLE_DATABASE_URL", "ERASURE_DATABASE_URL"):
        url = console_env[var]
        assert url.startswith("postgresql://erasure_console:${CONSOLE_DB_PASSWORD:?"), var
        assert f"//{owner.group(1)}:" not in url
    login = services["console-login"]
    assert login["depends_on"]["setup"]["condition"] == "service_completed_successfully"
    assert services["console"]["depends_on"]["console-login"]["condition"] == "service_completed_successfully"
    script = login["command"][0]
    assert "GRANT erasure_console_rights TO erasure_console" in script
    assert "\\getenv console_password CONSOLE_DB_PASSWORD" in script  # the password never on a command line
    assert re.search(r"^CONSOLE_DB_PASSWORD=$", (DEPLOY / ".env.example").read_text(), re.MULTILINE)
