"""The mode, the local state directory and Temporal: its frontend, its UI (and who may reach the codec
through it), TLS, the task queues, the worker's slots and pollers, and worker versioning."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SecretStr

from workers.settings.names import REQUIRED_IN_PRODUCTION, Port, file_help

#: the erasure worker's activity slots and its pollers of each kind, unless set (the pollers: the SDK's default)
ACTIVITY_SLOTS = 16
TASK_POLLERS = 5


class StackSettings(BaseModel):
    """Where the worker runs and how it reaches Temporal."""

    mode: Literal["local", "production"] = Field(
        default="local",
        description="local (the embedded stack, secrets from the local secrets file) or production (every "
        "required setting and secret must be given; the local secrets file is never read or created).",
    )
    state_dir: str = Field(default=".state", description="Directory for local stack data, pids, logs and secrets.")
    temporal_address: str = Field(
        default="",
        description="host:port of an external Temporal frontend. Empty: the local dev server on ERASURE_TEMPORAL_PORT.",
        json_schema_extra=REQUIRED_IN_PRODUCTION,
    )
    temporal_port: Port = Field(default=7233, description="Port of the local Temporal dev server (gRPC).")
    temporal_ui_port: Port = Field(default=8233, description="Port of the local Temporal web UI.")
    temporal_ui_url: str = Field(
        default="",
        description="Base URL of Temporal UI for links (the console's /temporal when it proxies the UI). Empty: "
        "the console's /temporal in local mode (the local UI, decoded behind the console's login).",
    )
    temporal_ui_upstream: str = Field(
        default="",
        description="A Temporal UI served under the public path /temporal that the console proxies behind its "
        "login (so the UI's codec calls carry the console session). Empty: the local UI in local mode, none in "
        "production; 'none': no proxy.",
    )
    codec_allowed_origins: str = Field(
        default="",
        description="Comma-separated browser origins of Temporal UIs on another origin allowed to call the "
        "console's /codec/decode (e.g. https://cloud.temporal.io). The console's own origin is always allowed.",
    )
    console_cross_site_cookie: bool = Field(
        default=False,
        description="true: the console's session cookie is SameSite=None; Secure, so a Temporal UI on another "
        "site (Temporal Cloud) sends it to /codec/decode with 'include cross-origin credentials' (HTTPS only).",
    )
    idp_port: Port = Field(
        default=8090, description="Port of the local stack's identity provider (demo logins for the console)."
    )
    temporal_namespace: str = Field(default="default", min_length=1, description="Temporal namespace.")
    temporal_tls: bool = Field(
        default=False,
        description="true: connect to Temporal over TLS with the system's trust store (implied by any "
        "ERASURE_TEMPORAL_TLS_* setting or an API key).",
    )
    temporal_tls_ca_file: str = Field(
        default="", description="PEM file of the CA(s) the Temporal frontend's certificate must chain to."
    )
    temporal_tls_cert_file: str = Field(
        default="", description="PEM client certificate for mTLS to Temporal (with ERASURE_TEMPORAL_TLS_KEY_FILE)."
    )
    temporal_tls_key_file: str = Field(
        default="", description="PEM private key of the mTLS client certificate (a mounted secret file)."
    )
    temporal_tls_server_name: str = Field(
        default="", description="Name the Temporal server's certificate must carry, when not the address's host."
    )
    temporal_api_key: SecretStr = Field(
        default=SecretStr(""), description="Temporal Cloud API key (a secret; sent over TLS only, never logged)."
    )
    temporal_api_key_file: str = Field(default="", description=file_help("temporal_api_key"))
    temporal_oauth_token_url: str = Field(
        default="",
        description="OAuth 2.0 token endpoint the worker and the console get a short-lived JWT from "
        "(client-credentials grant) for a Temporal frontend with the stock JWT authorizer "
        "(deploy/temporal/frontend-mtls.yaml); fetched again before it expires. Empty: no token.",
    )
    temporal_oauth_client_id: str = Field(
        default="", description="Client id of this process at ERASURE_TEMPORAL_OAUTH_TOKEN_URL (a writer)."
    )
    temporal_oauth_client_secret: SecretStr = Field(
        default=SecretStr(""), description="Secret of ERASURE_TEMPORAL_OAUTH_CLIENT_ID (never logged)."
    )
    temporal_oauth_client_secret_file: str = Field(default="", description=file_help("temporal_oauth_client_secret"))
    temporal_ui_oauth_client_id: str = Field(
        default="",
        description="Client id, at ERASURE_TEMPORAL_OAUTH_TOKEN_URL, of the read-only token the console adds to "
        "every call it proxies to Temporal UI (the frontend then refuses any write from the UI). Empty: none.",
    )
    temporal_ui_oauth_client_secret: SecretStr = Field(
        default=SecretStr(""), description="Secret of ERASURE_TEMPORAL_UI_OAUTH_CLIENT_ID (never logged)."
    )
    temporal_ui_oauth_client_secret_file: str = Field(
        default="", description=file_help("temporal_ui_oauth_client_secret")
    )
    task_queue: str = Field(default="erasure", min_length=1, description="Task queue of the erasure worker.")
    physical_task_queue: str = Field(
        default="erasure-physical",
        min_length=1,
        description="Task queue of the physical clean-up job (its own slots: it never takes an erasure's).",
    )
    worker_runs: Literal["all", "erasure", "physical"] = Field(
        default="all",
        description="Which workers 'erasure worker' runs: all (the erasure's on ERASURE_TASK_QUEUE and the physical "
        "job's on ERASURE_PHYSICAL_TASK_QUEUE), erasure or physical (one each, for a Deployment of its own).",
    )
    max_concurrent_activities: int = Field(
        default=ACTIVITY_SLOTS,
        ge=1,
        le=1000,
        description="Activity slots of the erasure worker (one thread each): activities one process runs at once. "
        "The physical job's worker keeps its own 2.",
    )
    workflow_task_pollers: int = Field(
        default=TASK_POLLERS,
        ge=2,
        le=100,
        description="Most concurrent workflow task polls of the erasure worker (at least 2: sticky and normal).",
    )
    activity_task_pollers: int = Field(
        default=TASK_POLLERS, ge=1, le=100, description="Most concurrent activity task polls of the erasure worker."
    )
    worker_deployment_name: str = Field(
        default="",
        description="Temporal Worker Deployment of the workers (worker versioning, see deploy/README.md): a worker "
        "then needs ERASURE_WORKER_BUILD_ID; 'erasure deployment' operates on it. Empty: unversioned workers.",
    )
    worker_build_id: str = Field(
        default="",
        description="Build id of this worker's code within ERASURE_WORKER_DEPLOYMENT_NAME (the image tag, say); "
        "a new build id for every release that changes workflow code.",
    )
