"""The deployment's secrets: the subject key's secret, the receipt signing key, the payload codec's keys and
the codec server's token, each from its variable or from the file its ``*_FILE`` variable names."""

from __future__ import annotations

from pydantic import BaseModel, Field, SecretStr

from workers.settings.names import REQUIRED_IN_PRODUCTION, SECRET_FILES, file_help, var


class SecretSettings(BaseModel):
    """Secrets (``SecretStr``: never shown) and the files that may hold them."""

    subject_key_secret: SecretStr = Field(
        default=SecretStr(""),
        description="Hex secret keying the pseudonymous subject key. Empty: from the local secrets file "
        "('erasure stack up').",
        json_schema_extra=REQUIRED_IN_PRODUCTION,
    )
    subject_key_secret_file: str = Field(default="", description=file_help("subject_key_secret"))
    signing_key: SecretStr = Field(
        default=SecretStr(""),
        description="Hex Ed25519 private key (32 bytes) signing receipts. Empty: from the local secrets file "
        "('erasure stack up').",
        json_schema_extra=REQUIRED_IN_PRODUCTION,
    )
    signing_key_file: str = Field(default="", description=file_help("signing_key"))
    payload_key: SecretStr = Field(
        default=SecretStr(""),
        description="Hex AES-256 key of the Temporal payload codec. Empty: from the local secrets file "
        "('erasure stack up').",
        json_schema_extra=REQUIRED_IN_PRODUCTION,
    )
    payload_key_file: str = Field(default="", description=file_help("payload_key"))
    payload_old_keys: SecretStr = Field(
        default=SecretStr(""),
        description="Comma-separated hex AES-256 payload keys retired by a rotation, still used to decode (never "
        "to encode) until no open workflow holds payloads sealed under them.",
    )
    payload_old_keys_file: str = Field(default="", description=file_help("payload_old_keys"))
    codec_token: SecretStr = Field(
        default=SecretStr(""),
        description="Bearer token (32+ characters) the codec server requires. Empty: 'erasure codec-server' "
        "refuses to start.",
    )
    codec_token_file: str = Field(default="", description=file_help("codec_token"))

    def source_of(self, name: str) -> str:
        """Where secret ``name`` came from, for error messages: its variable, or the file variable."""
        file_field = SECRET_FILES.get(name)
        return var(file_field) if file_field and getattr(self, file_field) else var(name)

    def _from(self, name: str) -> str:
        file_field = SECRET_FILES.get(name)
        return f" (from {var(file_field)})" if file_field and getattr(self, file_field) else ""

    def secret_value(self, name: str) -> str:
        """The plain value of secret field ``name`` (empty when unset): for the code that uses it, never to log."""
        value = getattr(self, name)
        assert isinstance(value, SecretStr)
        return value.get_secret_value()

    def _plain(self, name: str) -> str:
        value = getattr(self, name)
        return value.get_secret_value() if isinstance(value, SecretStr) else str(value)

    @property
    def payload_old_key_list(self) -> list[str]:
        """The retired payload keys (hex), in the order given; empty entries dropped."""
        return [k.strip() for k in self.secret_value("payload_old_keys").split(",") if k.strip()]
