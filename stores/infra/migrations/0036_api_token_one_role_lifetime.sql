-- API tokens carry one role, expire, record their last use and name the token they replaced (issue 40).
--
-- A token that carried two roles let them combine into a wider power (requester + auditor cancelled anyone's
-- request): tokens minted before are revoked here, with the reason shown on the tokens page and in the API;
-- their holders mint one token per role. Tokens minted before get 90 days from now (the default of
-- ERASURE_API_TOKEN_LIFETIME_DAYS); new ones get the lifetime the console sets when minting.
-- ``last_used_at`` is written at most once a minute per token (``console.tokens``), not on every call.
-- Idempotent: running it again changes nothing that is already right.
ALTER TABLE api_tokens ADD COLUMN IF NOT EXISTS expires_at timestamptz;
ALTER TABLE api_tokens ADD COLUMN IF NOT EXISTS last_used_at timestamptz;
ALTER TABLE api_tokens ADD COLUMN IF NOT EXISTS rotated_from text;
ALTER TABLE api_tokens ADD COLUMN IF NOT EXISTS revoked_reason text;

UPDATE api_tokens SET expires_at = now() + interval '90 days' WHERE expires_at IS NULL;
ALTER TABLE api_tokens ALTER COLUMN expires_at SET NOT NULL;

UPDATE api_tokens
SET revoked_at = now(),
    revoked_reason = 'carried ' || array_to_string(roles, ' and ')
        || ': a token carries one role since issue 40; mint one token per role'
WHERE revoked_at IS NULL AND cardinality(roles) <> 1;
