// AllotCore — the Priority/Policy Engine's maths and the policy model (SPEC sections 6 and 10).
//
// Pure, synchronous and deterministic: no I/O, no clock reads (time is the `now` argument, seconds
// since the Unix epoch), nothing that depends on dictionary order. Depends only on AllotJSON.
//
// Entry points, from the bottom up:
//
// - `WaterFilling.fill` — weighted max-min fair share of one capacity (SPEC 6.2).
// - `PoolAllocation.compute` — one pool and dimension: idle allowances, water-filling, guardrails,
//   surplus and burst reserve, degraded mode, reasons (SPEC 6.1–6.4, 6.7, 6.9).
// - `Dampening.apply` — EWMA, deadband, persistence, step limits, rises wait for room, capacity
//   drops cut at once (SPEC 6.6).
// - `Policy.load(files:)` — `policies/*.json` into a validated `Policy`, every problem reported
//   with file, JSON path and reason (SPEC 10); `Policy.canonicalBytes` for `policy_version`.
// - `Plan.run` — `allot plan` / `POST /v1/plan` (SPEC 6, "What-if plans").
// - `PolicyEngine.decide` — one tick: `DecisionInput` + `EngineState` → `Decision` (everything
//   above plus overrides, proposals, burst credit and debt, budgets, alerts).
// - `Override.parse`, `Guardrails.crossings`, `Proposal.forOverride` — operator overrides and the
//   guardrail check that turns one into a proposal (SPEC 6.8).
// - `CostGovernance` and `BudgetWindow` — pricing, projections and budget caps (SPEC 6).
// - `AllocationBenchmark` — the micro-benchmarks behind `allot bench allocation` (SPEC 13).
