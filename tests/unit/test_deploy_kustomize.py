"""The Kustomize overlays (issue 42 item 4): each renders with ``kubectl kustomize`` (Debian's kubectl), passes
``kubernetes-validate --strict``, and renders what it promises. Production: the release is the image tag alone
(the workers' names, version labels and build id and the setup Job's name follow it), with the autoscaler, the
disruption budgets, the Ingress and the network policies. Local: one of each, unversioned, none of those. Both:
the Secret generated from files and mounted by every pod, and settings every pod's process accepts.

The autoscaler's metric is checked against the adapter rule that serves it and against what a worker really
exports on its metrics port (a real worker on the time-skipping server)."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
OVERLAYS = ("local", "production")
SECRETS_MOUNT = "/etc/erasure/secrets"
WORKERS = ("worker", "physical-worker")  # app.kubernetes.io/component of the two worker Deployments


def _kustomization(overlay: str) -> dict[str, Any]:
    data = yaml.safe_load((K8S / "overlays" / overlay / "kustomization.yaml").read_text())
    assert isinstance(data, dict)
    return data


def _secret_files(overlay: str) -> list[str]:
    (generator,) = [g for g in _kustomization(overlay)["secretGenerator"] if g["name"] == "erasure-secrets"]
    return [str(f) for f in generator["files"]]


def _copy_without_secrets(target: Path) -> Path:
    """deploy/k8s without whatever secret files a developer keeps in the overlays' secrets/ (never read here)."""

    def ignore(directory: str, names: list[str]) -> list[str]:
        if Path(directory).name == "secrets":
            return [n for n in names if n not in (".gitignore", "README.md")]
        return []

    shutil.copytree(K8S, target, ignore=ignore)
    return target


def _render_copy(k8s: Path, overlay: str) -> str:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip(
            "kubectl is not installed (Debian: apt-get install kubectl; .ci/run installs it): overlays not rendered"
        )
    for entry in _secret_files(overlay):
        path = k8s / "overlays" / overlay / entry.rpartition("=")[2]
        path.write_text(f"REPLACE_ME {path.name}\n")
    result = subprocess.run(
        [kubectl, "kustomize", str(k8s / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    k8s = _copy_without_secrets(tmp_path_factory.mktemp("k8s") / "k8s")
    return {overlay: _render_copy(k8s, overlay) for overlay in OVERLAYS}


def _docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def _of(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def _one(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [d for d in _of(docs, kind) if d["metadata"]["name"] == name]
    return found


def _workloads(docs: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for doc in docs:
        if doc["kind"] in ("Deployment", "Job") and doc["metadata"]["labels"]["app.kubernetes.io/name"] == (
            "erasure-orchestrator"
        ):
            yield doc


def _containers(workload: dict[str, Any]) -> list[dict[str, Any]]:
    spec = workload["spec"]["template"]["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


def _by_component(docs: list[dict[str, Any]], component: str) -> dict[str, Any]:
    (found,) = [
        d for d in _of(docs, "Deployment") if d["metadata"]["labels"].get("app.kubernetes.io/component") == component
    ]
    return found


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: str(e.get("value", "")) for e in container.get("env", [])}


# ----- rendering and the Kubernetes API's schemas ------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_renders_and_passes_kubernetes_validate_strict(
    overlay: str, rendered: dict[str, str], tmp_path: Path
) -> None:
    tool = shutil.which("kubernetes-validate", path=str(Path(sys.executable).parent)) or shutil.which(
        "kubernetes-validate"
    )
    if tool is None:
        pytest.skip("kubernetes-validate is not installed (pip install -e '.[dev]')")
    manifest = tmp_path / f"{overlay}.yaml"
    manifest.write_text(rendered[overlay])
    result = subprocess.run(
        [tool, "--strict", "--quiet", str(manifest)], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    kinds = {d["kind"] for d in _docs(rendered[overlay])}
    assert {"Deployment", "Job", "ConfigMap", "Secret", "NetworkPolicy", "ServiceAccount"} <= kinds


# ----- the Secret, from files -------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_pod_mounts_the_secret_generated_from_the_files(overlay: str, rendered: dict[str, str]) -> None:
    docs = _docs(rendered[overlay])
    (secret,) = _of(docs, "Secret")
    name = secret["metadata"]["name"]
    assert re.fullmatch(r"erasure-secrets-[a-z0-9]{10}", name), "named by its contents: a changed file rolls the pods"
    keys = set(secret["data"])
    assert keys == {Path(f.rpartition("=")[2]).name for f in _secret_files(overlay)}
    config = {k: str(v) for cm in _of(docs, "ConfigMap") for k, v in (cm.get("data") or {}).items()}
    for workload in _workloads(docs):
        volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"]["volumes"]}
        for container in _containers(workload):
            (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == SECRETS_MOUNT]
            volume = volumes[mount["name"]]["secret"]
            assert volume["secretName"] == name, workload["metadata"]["name"]
            mounted = {i["path"] for i in volume.get("items", [])} or keys
            files = {v for k, v in {**config, **_env(container)}.items() if k.endswith("_FILE")}
            for path in files:
                assert path.removeprefix(SECRETS_MOUNT + "/") in mounted, f"{container['name']}: {path} not mounted"


# ----- every pod's settings are accepted by the process ------------------------------------------------


def _secret_value(key: str) -> str:
    if key.endswith("database-url"):
        return "postgresql://erasure:REPLACE_ME@postgres.example.com:5432/erasure"
    return "ab" * 32


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_gets_settings_its_process_accepts(
    overlay: str, rendered: dict[str, str], tmp_path: Path
) -> None:
    """The variables a container gets (its ConfigMaps, then its env), with the mounted files stood in for:
    a build id without a Worker Deployment, a malformed URL or two ports on one would stop the pod at start."""
    from workers.settings import Settings

    docs = _docs(rendered[overlay])
    maps = {cm["metadata"]["name"]: cm.get("data") or {} for cm in _of(docs, "ConfigMap")}
    for key in _of(docs, "Secret")[0]["data"]:
        (tmp_path / key).write_text(_secret_value(key))
    checked = 0
    for workload in _workloads(docs):
        for container in _containers(workload):
            env = {k: str(v) for ref in container["envFrom"] for k, v in maps[ref["configMapRef"]["name"]].items()}
            env.update(_env(container))
            env = {k: v.replace(SECRETS_MOUNT, str(tmp_path)) for k, v in env.items() if k.startswith("ERASURE_")}
            Settings.from_env(env)
            checked += 1
    assert checked >= 5  # the two workers, the setup Job's two containers, the console


# ----- production: the release is the image tag -------------------------------------------------------


def _check_release(docs: list[dict[str, Any]], tag: str) -> None:
    for component in WORKERS:
        deployment = _by_component(docs, component)
        assert deployment["metadata"]["name"] == f"erasure-{component}-{tag}"
        labels = [
            deployment["metadata"]["labels"],
            deployment["spec"]["selector"]["matchLabels"],
            deployment["spec"]["template"]["metadata"]["labels"],
        ]
        assert all(each["app.kubernetes.io/version"] == tag for each in labels)
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        assert container["image"].endswith(f":{tag}")
        assert _env(container)["ERASURE_WORKER_BUILD_ID"] == tag
    (scaler,) = _of(docs, "HorizontalPodAutoscaler")
    assert scaler["spec"]["scaleTargetRef"]["name"] == f"erasure-worker-{tag}" == scaler["metadata"]["name"]
    (job,) = _of(docs, "Job")
    assert job["metadata"]["name"] == f"erasure-setup-{tag}", "a new setup Job per release (Jobs are immutable)"
    config = _one(docs, "ConfigMap", "erasure-config")["data"]
    assert config["ERASURE_WORKER_DEPLOYMENT_NAME"], "versioned workers"


def test_production_names_each_release_by_its_image_tag(rendered: dict[str, str], tmp_path: Path) -> None:
    (image,) = _kustomization("production")["images"]
    _check_release(_docs(rendered["production"]), image["newTag"])
    assert not re.search(r"\bTAG\b", rendered["production"]), "the base's placeholder left in the production render"

    # the next release: one line changed (`kustomize edit set image` writes the same), everything follows
    k8s = _copy_without_secrets(tmp_path / "k8s")
    kustomization = k8s / "overlays" / "production" / "kustomization.yaml"
    kustomization.write_text(
        kustomization.read_text().replace(f'newTag: "{image["newTag"]}"', 'newTag: "2027-01-04.2"', 1)
    )
    _check_release(_docs(_render_copy(k8s, "production")), "2027-01-04.2")


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    return bool(selector.get("matchLabels", {}).items() <= labels.items())


def test_production_keeps_the_autoscaler_the_budgets_the_ingress_and_the_policies(rendered: dict[str, str]) -> None:
    docs = _docs(rendered["production"])
    assert {d["metadata"].get("namespace") for d in docs} == {"erasure"}
    (scaler,) = _of(docs, "HorizontalPodAutoscaler")
    assert scaler["spec"]["minReplicas"] >= 2
    assert [m["type"] for m in scaler["spec"]["metrics"]] == ["External"]
    assert "replicas" not in _by_component(docs, "worker")["spec"], "the autoscaler's to set"
    budgets = _of(docs, "PodDisruptionBudget")
    for component in ("worker", "console"):
        labels = _by_component(docs, component)["spec"]["template"]["metadata"]["labels"]
        assert sum(_selects(b["spec"]["selector"], labels) for b in budgets) == 1, component
    assert len(_of(docs, "Ingress")) == 1
    policies = [p for p in _of(docs, "NetworkPolicy") if "Ingress" in p["spec"]["policyTypes"]]
    for workload in [*_workloads(docs), _one(docs, "Deployment", "temporal-ui")]:
        labels = workload["spec"]["template"]["metadata"]["labels"]
        assert any(_selects(p["spec"]["podSelector"], labels) for p in policies), workload["metadata"]["name"]


# ----- local: one of each, unversioned ----------------------------------------------------------------


def test_local_runs_one_of_each_unversioned_without_autoscaler_budgets_or_ingress(rendered: dict[str, str]) -> None:
    docs = _docs(rendered["local"])
    assert {d["metadata"].get("namespace") for d in docs} == {"erasure-local"}
    assert not _of(docs, "HorizontalPodAutoscaler")
    assert not _of(docs, "PodDisruptionBudget"), "with one replica a budget blocks every drain"
    assert not _of(docs, "Ingress")
    for component in (*WORKERS, "console"):
        assert _by_component(docs, component)["spec"]["replicas"] == 1, component
    assert _one(docs, "ConfigMap", "erasure-config")["data"]["ERASURE_WORKER_DEPLOYMENT_NAME"] == ""
    for component in WORKERS:
        deployment = _by_component(docs, component)
        assert deployment["metadata"]["name"] == f"erasure-{component}"
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        assert container["image"] == "erasure-orchestrator:dev"
        assert _env(container)["ERASURE_WORKER_BUILD_ID"] == ""
    assert not re.search(r"\bTAG\b", rendered["local"])


# ----- the autoscaler's metric ------------------------------------------------------------------------

SERIES = "temporal_activity_schedule_to_start_latency"


def _autoscaler_metric() -> dict[str, Any]:
    docs = _docs((K8S / "base" / "hpa.yaml").read_text())
    ((metric,),) = [d["spec"]["metrics"] for d in docs]
    assert metric["type"] == "External"
    external = metric["external"]
    assert isinstance(external, dict)
    return external


def test_the_autoscaler_reads_the_metric_the_adapter_rule_serves() -> None:
    external = _autoscaler_metric()
    values = yaml.safe_load((K8S / "prometheus-adapter" / "values.yaml").read_text())
    (rule,) = values["rules"]["external"]
    assert rule["name"]["as"] == external["metric"]["name"]
    assert rule["seriesQuery"].startswith(f"{SERIES}_bucket{{")
    assert re.fullmatch(rule["name"]["matches"], f"{SERIES}_bucket")
    query = " ".join(rule["metricsQuery"].split())
    assert "histogram_quantile(0.95," in query
    assert "rate(<<.Series>>{<<.LabelMatchers>>}" in query
    assert "or vector(0)" in query, "idle, the quantile is NaN: the workers would never scale back down"
    config = _docs((K8S / "base" / "configmap.yaml").read_text())[0]["data"]
    assert external["metric"]["selector"]["matchLabels"] == {"task_queue": config["ERASURE_TASK_QUEUE"]}


@activity.defn(name="autoscaler_probe")
def _probe() -> str:
    return "ok"


@workflow.defn(name="AutoscalerProbeWorkflow", sandboxed=False)
class AutoscalerProbeWorkflow:
    @workflow.run
    async def run(self) -> str:
        return str(await workflow.execute_activity(_probe, start_to_close_timeout=timedelta(seconds=30)))


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        return str(reply.read().decode())


@pytest.mark.asyncio(loop_scope="session")
async def test_the_worker_exports_the_series_the_autoscaler_reads(time_skipping_env: WorkflowEnvironment) -> None:
    """The SDK runtime the worker connects with (``workers.temporal_client.runtime_for``, its metrics port)
    exports the histogram, in milliseconds, labelled with the task queue the autoscaler selects by."""
    from tests.stack_fixture import free_port_block
    from workers.temporal_client import runtime_for

    port = free_port_block(1)
    client = await Client.connect(
        time_skipping_env.client.service_client.config.target_host,
        namespace=time_skipping_env.client.namespace,
        runtime=runtime_for(port),
    )
    queue = f"autoscaler-{uuid.uuid4().hex[:8]}"
    async with Worker(
        client,
        task_queue=queue,
        workflows=[AutoscalerProbeWorkflow],
        activities=[_probe],
        activity_executor=ThreadPoolExecutor(max_workers=1),
    ):
        assert await client.execute_workflow(AutoscalerProbeWorkflow.run, id=queue, task_queue=queue) == "ok"
        text = ""
        for _ in range(50):  # the runtime exports on its own schedule
            text = await asyncio.to_thread(_scrape, port)
            if f"{SERIES}_bucket" in text:
                break
            await asyncio.sleep(0.1)
    lines = [line for line in text.splitlines() if line.startswith(f"{SERIES}_bucket{{")]
    label = next(iter(_autoscaler_metric()["metric"]["selector"]["matchLabels"]))
    assert any(f'{label}="{queue}"' in line and 'le="' in line for line in lines), lines[:3]
    assert "temporal_worker_task_slots_available" in text  # ERASURE_MAX_CONCURRENT_ACTIVITIES, seen
