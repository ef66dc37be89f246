-- The tokens of the served attempts (outcome `ok`) in each rollup row, beside the tokens of every attempt. Showback
-- (`GET /v1/costs`) and the spend budgets price what the provider bills, which is served calls: before this the
-- showback priced the tokens every event reported, refused and failed attempts too, while the budgets counted served
-- calls only, so one row of the costs CSV gave two figures for one day's spend (outside evaluation round 27, M1).
-- Rows written before this migration did not tell outcomes apart: their columns stay NULL (adding a nullable column
-- rewrites nothing, however large the table) and are read as every attempt's tokens where the minute had a served
-- call and as none where it had none (`TelemetryWriter.rollupReadExpression`); an event added to such a row later
-- starts from that reading.
ALTER TABLE rollups_minute ADD COLUMN served_prompt_tokens INTEGER;
ALTER TABLE rollups_minute ADD COLUMN served_completion_tokens INTEGER;
