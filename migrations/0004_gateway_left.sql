-- A gateway that said it leaves (DELETE /v1/gateways/{id}, sent by a gateway as it stops) keeps its row, marked,
-- until it is forgotten with the others (loop.forget_after_s): after a restart it is still gone — its tenants'
-- slices stay with the other gateways although the restored demand shares still name it — and it is not listed.
-- NULL for a gateway that has not left (or has polled again since).
ALTER TABLE gateway_contacts ADD COLUMN left_ms INTEGER;
