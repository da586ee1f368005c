"""deploy/kubernetes: every manifest is a valid Kubernetes object, and agrees with the gateway itself.

No cluster here: each YAML document is built with the official ``kubernetes`` client's models
(a field the models do not know is a typo the API server would refuse), the kustomizations are
resolved by hand (resources and strategic-merge patches of containers and env by name), and the
values that must match the gateway are checked against it: the port it serves, the health paths
its app answers, the config path it reads, the user the image runs as, the drain it needs.
"""

from __future__ import annotations

import copy
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

kubernetes = pytest.importorskip("kubernetes")
from kubernetes.client import ApiClient  # noqa: E402

from gateway.settings import ServerSettings, Settings  # noqa: E402
from gateway.store.redis_client import parse_sentinel_url  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "kubernetes"
MODELS = {
    ("apps/v1", "Deployment"): "V1Deployment",
    ("apps/v1", "StatefulSet"): "V1StatefulSet",
    ("v1", "Service"): "V1Service",
    ("v1", "ConfigMap"): "V1ConfigMap",
    ("policy/v1", "PodDisruptionBudget"): "V1PodDisruptionBudget",
    ("autoscaling/v2", "HorizontalPodAutoscaler"): "V2HorizontalPodAutoscaler",
}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _strip(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _strip(v) for k, v in data.items() if v is not None}
    if isinstance(data, list):
        return [_strip(v) for v in data]
    return data


def build(doc: dict[str, Any]) -> Any:
    """The client model of ``doc``; fails when a field is unknown to the model (it would be dropped)."""
    model = MODELS[(doc["apiVersion"], doc["kind"])]
    client = ApiClient()
    obj = client._ApiClient__deserialize(copy.deepcopy(doc), model)  # the client's own JSON → model path
    back = _strip(client.sanitize_for_serialization(obj))
    assert back == _strip(doc), f"{doc['kind']} {doc['metadata']['name']}: fields the API does not know"
    return obj


def load(folder: Path) -> list[dict[str, Any]]:
    """``kustomize build folder``, for what these manifests use: resources (files or folders) and patches."""
    kust = yaml.safe_load((folder / "kustomization.yaml").read_text())
    docs: list[dict[str, Any]] = []
    for res in kust.get("resources", []):
        path = (folder / res).resolve()
        assert path.exists(), f"{folder / 'kustomization.yaml'} lists {res}, which does not exist"
        if path.is_dir():
            assert path != folder.parent.resolve(), "an overlay may not point at its own parent"
            docs += load(path)
        else:
            docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    for patch in kust.get("patches", []):
        change = yaml.safe_load((folder / patch["path"]).read_text())
        target = next(
            d for d in docs if d["kind"] == change["kind"] and d["metadata"]["name"] == change["metadata"]["name"]
        )
        _merge(target, change)
    return docs


def _merge(into: dict[str, Any], change: dict[str, Any]) -> None:
    for key, value in change.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        elif (
            isinstance(value, list)
            and isinstance(into.get(key), list)
            and value
            and isinstance(value[0], dict)
            and "name" in value[0]
        ):
            for item in value:
                match = next((x for x in into[key] if x.get("name") == item["name"]), None)
                if match is None:
                    into[key].append(item)
                else:
                    _merge(match, item)
        else:
            into[key] = value


def one(docs: list[dict[str, Any]], kind: str, name: str = "llm-gateway") -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


def gateway_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return next(c for c in one(docs, "Deployment")["spec"]["template"]["spec"]["containers"] if c["name"] == "gateway")


BUILDS = [K8S, K8S / "overlays" / "redis"]


@pytest.mark.parametrize("folder", BUILDS, ids=["base", "redis"])
def test_every_object_is_a_valid_kubernetes_object(folder: Path) -> None:
    docs = load(folder)
    for doc in docs:
        build(doc)
    kinds = {d["kind"] for d in docs}
    assert {"Deployment", "Service", "ConfigMap", "PodDisruptionBudget"} <= kinds


def test_every_yaml_file_is_used() -> None:
    listed: set[Path] = set()
    for kust in K8S.rglob("kustomization.yaml"):
        spec = yaml.safe_load(kust.read_text())
        listed |= {(kust.parent / r).resolve() for r in spec.get("resources", [])}
        listed |= {(kust.parent / p["path"]).resolve() for p in spec.get("patches", [])}
    files = {p.resolve() for p in K8S.rglob("*.yaml") if p.name != "kustomization.yaml"}
    assert files - listed == set()


@pytest.mark.parametrize("folder", BUILDS, ids=["base", "redis"])
def test_the_deployment_matches_the_gateway(folder: Path) -> None:
    docs = load(folder)
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    c = gateway_container(docs)
    args = c["args"]
    port = int(args[args.index("--port") + 1])
    assert [p["containerPort"] for p in c["ports"] if p["name"] == "http"] == [port]
    # the Service reaches that port, and selects the pods
    svc = one(docs, "Service")
    assert svc["spec"]["ports"][0]["targetPort"] == "http"
    labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= labels.items()
    # probes: the paths the app answers (200 when ready), on the named port
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    # the config the gateway is told to read is the ConfigMap's file, mounted there
    config = Path(args[args.index("--config") + 1])
    mount = next(m for m in c["volumeMounts"] if Path(m["mountPath"]) == config.parent)
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    cm = one(docs, "ConfigMap", volume["configMap"]["name"])
    text = cm["data"][config.name]
    settings = Settings(**tomllib.loads(text))
    assert settings.server.port == port and settings.server.host == "0.0.0.0"
    assert "store" not in tomllib.loads(text), (
        "a [store] url in the file is overridden by the image's GATEWAY_STORE__URL"
    )
    # caller keys from a Secret, as the config's keys_env names them (a non-loopback bind needs keys)
    env = {e["name"]: e for e in c["env"]}
    assert env[settings.auth.keys_env]["valueFrom"]["secretKeyRef"]["name"]
    assert not any("value" in e and re.search("KEY|TOKEN|SECRET", e["name"]) for e in c["env"])
    # non-root, as the image's named user
    uid = int(re.search(r"--uid (\d+)", (ROOT / "Dockerfile").read_text()).group(1))  # type: ignore[union-attr]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == uid
    # the pod is given longer than the drain: the preStop pause, then shutdown_grace_seconds
    pause = int(c["lifecycle"]["preStop"]["exec"]["command"][-1])
    assert pod["terminationGracePeriodSeconds"] > pause + settings.server.shutdown_grace_seconds
    assert ServerSettings().shutdown_grace_seconds <= settings.server.shutdown_grace_seconds


def test_the_probe_paths_are_the_apps() -> None:
    from starlette.testclient import TestClient

    from gateway.server.app import create_app
    from gateway.settings import Settings as S

    with TestClient(create_app(S(providers=[{"name": "demo", "dialect": "demo"}]))) as client:
        assert client.get("/healthz").status_code == 200
        assert client.get("/readyz").status_code == 200


def test_the_redis_overlay_points_the_store_at_sentinel() -> None:
    docs = load(K8S / "overlays" / "redis")
    env = {e["name"]: e.get("value") for e in gateway_container(docs)["env"]}
    hosts, master, db, _ = parse_sentinel_url(env["GATEWAY_STORE__URL"])
    redis_svc = one(docs, "Service", "llm-gateway-redis")
    sentinel_port = next(p["port"] for p in redis_svc["spec"]["ports"] if p["name"] == "sentinel")
    sts = one(docs, "StatefulSet", "llm-gateway-redis")
    names = {f"{sts['metadata']['name']}-{i}.{sts['spec']['serviceName']}" for i in range(sts["spec"]["replicas"])}
    assert {h for h, _ in hosts} == names and {p for _, p in hosts} == {sentinel_port}
    init = one(docs, "ConfigMap", "llm-gateway-redis")["data"]["init.sh"]
    assert f"sentinel monitor {master} " in init and db == 0
    assert one(docs, "Deployment")["spec"]["replicas"] >= 2
    hpa = one(docs, "HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"]["name"] == "llm-gateway"
