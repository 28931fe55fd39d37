-- Claims handed back by their worker (issue 37: a graceful stop strands nothing). A release
-- that arrives before its claim commits is found by the claim's own check right after it
-- commits (docket_store::Release). Marks are kept an hour, far longer than a claim takes.
CREATE TABLE docket_claim_releases (
    nonce uuid PRIMARY KEY,
    released_at timestamptz NOT NULL
);
