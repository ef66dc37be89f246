-- When the version a gateway enforces was superseded, as the service saw it while it still remembered that version's
-- successor (the last 512 versions, in memory): kept with the contact so that a gateway's lag_s keeps growing past
-- that memory and across restarts (outside evaluation round 22: a gateway 1,336 s behind was reported 869 s behind,
-- and every restart started it from zero). NULL while its version is current or not yet seen superseded.
ALTER TABLE gateway_contacts ADD COLUMN behind_since_ms INTEGER;
