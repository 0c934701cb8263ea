-- Reserve $1 lease tokens for this node's next claims (src/claim_tokens.rs): each claim leases
-- its jobs under one of them, known before the claim is sent.
SELECT nextval('drover.lease_tokens') FROM generate_series(1, $1::bigint)
