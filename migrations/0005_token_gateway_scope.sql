-- A gateway token may be limited to the gateway ids it speaks for: an exact id (`gw-eu-1`) or a prefix ending
-- in `*` (`gw-eu-*`). Its telemetry events' `gateway`, its snapshot polls' `?gateway=` and the gateway it retires
-- (DELETE /v1/gateways/{id}) must match, else 403 gateway_out_of_scope: a leaked token of one fleet cannot
-- report as, poll as or retire another fleet's gateways. NULL: any gateway id (every token before this).
ALTER TABLE api_tokens ADD COLUMN gateway_scope TEXT;
