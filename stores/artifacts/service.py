"""google-adk ``BaseArtifactService`` on S3, each blob sealed with its owner's data key.

The key layout is ``stores.artifacts.bucket``'s; the erase adapter there removes what this service writes. The
caller's ``custom_metadata`` is sealed too (``sealed:v1:`` + base64, bound to the object key): S3 keeps
metadata in the object store's own database (SeaweedFS's filer store), where no deletion of the object's
bytes reaches. Filenames are part of the object key and stay readable (they are how versions are listed).

``delete_artifact`` (the user's own agent deleting its own artifact) is gated on the owner
(``stores.ledgers.owner_holds.gated``): the versions go while the owner's hold lock is held shared in a
transaction that read the owner's hold; under a legal hold the delete is refused with ``OwnerHeld`` ("under a
legal hold: nothing was changed"), which the agent's tool call sees, and every version stays.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from botocore.exceptions import ClientError
from google.adk.artifacts.base_artifact_service import ArtifactVersion, BaseArtifactService, ensure_part
from google.genai import types

from stores.artifacts.bucket import artifact_prefix, session_prefix, user_scope_prefix
from stores.ledgers.owner_holds import gated
from stores.privacy.identity import subject_key
from stores.privacy.keys import DataKeyStore

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from psycopg_pool import ConnectionPool

SEALED_CUSTOM = "sealed:v1:"
CUSTOM_CONTEXT = "/custom-metadata"


class S3ArtifactService(BaseArtifactService):
    """ADK artifact service on S3, encrypting each blob with the owner's data key."""

    def __init__(
        self, s3: S3Client, bucket: str, keys: DataKeyStore, subject_secret: bytes, pool: ConnectionPool
    ) -> None:
        self._s3 = s3
        self._pool = pool  # the hold store: a delete reads the owner's hold
        self._bucket = bucket
        self._keys = keys
        self._secret = subject_secret

    def _sk(self, app_name: str, user_id: str) -> str:
        return subject_key(self._secret, app_name, user_id)

    # ----- sync internals (run in a thread) ------------------------------------------------------

    def _versions(self, prefix: str) -> list[int]:
        found: list[int] = []
        for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=self._bucket, Prefix=prefix):
            for obj in page.get("Contents", []):
                tail = obj["Key"][len(prefix) :]
                if tail.isdigit():
                    found.append(int(tail))
        return sorted(found)

    def _save(
        self,
        app: str,
        user: str,
        filename: str,
        part: types.Part,
        session: str | None,
        meta: dict[str, Any] | None,
    ) -> int:
        prefix = artifact_prefix(app, self._sk(app, user), filename, session)
        versions = self._versions(prefix)
        version = versions[-1] + 1 if versions else 0
        key = f"{prefix}{version}"
        sk = self._sk(app, user)
        key_id, blob = self._keys.encrypt(sk, part.model_dump_json(exclude_none=True).encode(), key.encode())
        self._s3.put_object(
            Bucket=self._bucket,
            Key=key,
            Body=blob,
            Metadata={
                "data-key-id": str(key_id),
                "mime-type": (part.inline_data.mime_type or "") if part.inline_data else "text/plain",
                "custom": self._seal_custom(sk, key, meta or {}),
            },
        )
        return version

    def _seal_custom(self, sk: str, key: str, meta: dict[str, Any]) -> str:
        """The caller's custom metadata, sealed like the body (S3 metadata lands in the object store's own
        database, out of reach of any deletion of the object's bytes)."""
        _key_id, blob = self._keys.encrypt(sk, json.dumps(meta).encode("utf-8"), (key + CUSTOM_CONTEXT).encode())
        return SEALED_CUSTOM + base64.b64encode(blob).decode("ascii")

    def _open_custom(self, key: str, stored: str) -> dict[str, Any]:
        """The custom metadata of a version (written before sealing: plain JSON, read as it is)."""
        if not stored.startswith(SEALED_CUSTOM):
            return dict(json.loads(stored or "{}"))
        blob = base64.b64decode(stored[len(SEALED_CUSTOM) :])
        return dict(json.loads(self._keys.decrypt(blob, (key + CUSTOM_CONTEXT).encode())))

    def _load(self, app: str, user: str, filename: str, session: str | None, version: int | None) -> types.Part | None:
        prefix = artifact_prefix(app, self._sk(app, user), filename, session)
        if version is None:
            versions = self._versions(prefix)
            if not versions:
                return None
            version = versions[-1]
        key = f"{prefix}{version}"
        try:
            body = self._s3.get_object(Bucket=self._bucket, Key=key)["Body"].read()
        except ClientError as exc:
            if exc.response["Error"]["Code"] in ("NoSuchKey", "404", "NotFound"):
                return None
            raise
        return types.Part.model_validate_json(self._keys.decrypt(body, key.encode()))

    def _list_keys(self, app: str, user: str, session: str | None) -> list[str]:
        names: set[str] = set()
        sk = self._sk(app, user)
        prefixes = [user_scope_prefix(app, sk)]
        if session is not None:
            prefixes.append(session_prefix(app, sk, session))
        for prefix in prefixes:
            pages = self._s3.get_paginator("list_objects_v2").paginate(
                Bucket=self._bucket, Prefix=prefix, Delimiter="/"
            )
            for page in pages:
                for common in page.get("CommonPrefixes", []):
                    names.add(unquote(common["Prefix"][len(prefix) :].rstrip("/")))
        return sorted(names)

    def _delete(self, app: str, user: str, filename: str, session: str | None) -> None:
        sk = self._sk(app, user)
        prefix = artifact_prefix(app, sk, filename, session)
        with gated(self._pool, [sk]):  # ``OwnerHeld`` before any version goes when the owner is held
            for version in self._versions(prefix):
                self._s3.delete_object(Bucket=self._bucket, Key=f"{prefix}{version}")

    def _version_info(self, app: str, user: str, filename: str, session: str | None) -> list[ArtifactVersion]:
        prefix = artifact_prefix(app, self._sk(app, user), filename, session)
        out: list[ArtifactVersion] = []
        for version in self._versions(prefix):
            head = self._s3.head_object(Bucket=self._bucket, Key=f"{prefix}{version}")
            meta = head.get("Metadata", {})
            out.append(
                ArtifactVersion(
                    version=version,
                    canonical_uri=f"s3://{self._bucket}/{prefix}{version}",
                    custom_metadata=self._open_custom(f"{prefix}{version}", meta.get("custom", "{}")),
                    create_time=head["LastModified"].timestamp(),
                    mime_type=meta.get("mime-type") or None,
                )
            )
        return out

    # ----- BaseArtifactService ------------------------------------------------------------------

    async def save_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        artifact: types.Part | dict[str, Any],
        session_id: str | None = None,
        custom_metadata: dict[str, Any] | None = None,
    ) -> int:
        part = ensure_part(artifact)
        return await asyncio.to_thread(self._save, app_name, user_id, filename, part, session_id, custom_metadata)

    async def load_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
        version: int | None = None,
    ) -> types.Part | None:
        return await asyncio.to_thread(self._load, app_name, user_id, filename, session_id, version)

    async def list_artifact_keys(self, *, app_name: str, user_id: str, session_id: str | None = None) -> list[str]:
        return await asyncio.to_thread(self._list_keys, app_name, user_id, session_id)

    async def delete_artifact(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> None:
        await asyncio.to_thread(self._delete, app_name, user_id, filename, session_id)

    async def list_versions(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> list[int]:
        prefix = artifact_prefix(app_name, self._sk(app_name, user_id), filename, session_id)
        return await asyncio.to_thread(self._versions, prefix)

    async def list_artifact_versions(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> list[ArtifactVersion]:
        return await asyncio.to_thread(self._version_info, app_name, user_id, filename, session_id)

    async def get_artifact_version(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
        version: int | None = None,
    ) -> ArtifactVersion | None:
        infos = await self.list_artifact_versions(
            app_name=app_name, user_id=user_id, filename=filename, session_id=session_id
        )
        if not infos:
            return None
        if version is None:
            return infos[-1]
        return next((i for i in infos if i.version == version), None)
