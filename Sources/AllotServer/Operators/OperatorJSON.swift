import AllotCore
import AllotJSON
import AllotLoop
import AllotStore
import AllotTime

/// The JSON shapes of the operator API (documented in `openapi.json`). Times are RFC 3339 UTC
/// strings with milliseconds; rates are per minute; unbounded values are `null`.
enum OperatorJSON {
    static func time(_ seconds: Double?) -> JSON {
        guard let seconds, seconds.isFinite else { return .null }
        return .string(RFC3339.format(seconds))
    }

    static func time(milliseconds: Int64?) -> JSON {
        time(milliseconds.map { EpochTime.seconds(fromMilliseconds: $0) })
    }

    /// A duration in seconds as text: whole seconds without a fraction, else as Swift prints it.
    static func seconds(_ value: Double) -> String {
        value.isFinite && value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : "\(value)"
    }

    static func number(_ value: Double?) -> JSON {
        guard let value, value.isFinite else { return .null }
        return .double(value)
    }

    static func dimensions(_ value: PerDimension<Double>) -> JSON {
        ["rpm": number(value.rpm), "tpm": number(value.tpm)]
    }

    static func dimensions(_ value: PerDimension<Double?>) -> JSON {
        ["rpm": number(value.rpm), "tpm": number(value.tpm)]
    }

    static func dimensions(_ value: PerDimension<Bool>) -> JSON {
        ["rpm": .bool(value.rpm), "tpm": .bool(value.tpm)]
    }

    static func override(_ stored: StoredOverride) -> JSON { stored.json }

    static func override(_ override: Override) -> JSON {
        self.override(StoredOverride(override: override))
    }

    static func crossing(_ crossing: Guardrails.Crossing) -> JSON {
        [
            "kind": .string(crossing.kind.rawValue), "upstream": .string(crossing.upstream),
            "dimension": .string(crossing.dimension.rawValue), "value": number(crossing.value),
            "guardrail": number(crossing.guardrail),
        ]
    }

    static func proposal(_ stored: StoredProposal, now: Double) -> JSON {
        let proposal = stored.proposal
        return [
            "id": .string(proposal.id), "source": .string(stored.source.rawValue),
            "kind": .string(proposal.kind.rawValue), "tenant": .string(proposal.tenant),
            "upstream": .string(proposal.upstream),
            "dimension": proposal.dimension.map { .string($0.rawValue) } ?? .null,
            "status": .string(stored.status(at: now)), "value": number(proposal.value),
            "guardrail": number(proposal.guardrail), "reason": .string(proposal.reason),
            "evidence": proposal.evidence?.json ?? .null,
            "override": proposal.override.map { override($0) } ?? .null,
            "crossings": .array(proposal.crossings.map(crossing)), "filed_at": time(proposal.filedAt),
            "updated_at": time(proposal.updatedAt), "expires_at": time(proposal.expiresAt),
            "decided_by": proposal.decidedBy.map(JSON.string) ?? .null, "decided_at": time(proposal.decidedAt),
        ]
    }

    static func credit(_ credit: BurstCredit?, now: Double) -> JSON {
        guard let credit else { return .null }
        let remaining = credit.remaining(at: now)
        return [
            "id": .string(credit.id), "upstream": .string(credit.upstream),
            "task_id": credit.taskID.map(JSON.string) ?? .null, "rate": dimensions(credit.rate),
            "granted_at": time(credit.grantedAt), "expires_at": time(credit.expiresAt),
            "remaining": ["calls": number(remaining.calls), "tokens": number(remaining.tokens)],
        ]
    }

    static func burst(_ stored: StoredBurst, now: Double) -> JSON {
        let request = stored.request
        return [
            "id": .string(request.id), "tenant": .string(request.tenant), "upstream": .string(request.upstream),
            "calls": number(request.calls), "tokens": number(request.tokens), "ttl_s": number(request.ttlSeconds),
            "task_id": request.taskID.map(JSON.string) ?? .null, "requested_at": time(request.requestedAt),
            "requested_by": .string(stored.requestedBy), "status": .string(stored.status),
            "decided_at": time(stored.decidedAt), "credit": credit(stored.credit, now: now),
        ]
    }

    static func account(_ account: BurstAccount, now: Double) -> JSON {
        [
            "credit": credit(account.credit, now: now),
            "debt": ["calls": number(account.debt.rpm), "tokens": number(account.debt.tpm)],
            "repay_by": time(account.repayBy), "lent": .int(Int64(account.lent)), "repaid": .int(Int64(account.repaid)),
            "defaulted": .int(Int64(account.defaulted)), "last_default_at": time(account.lastDefaultAt),
        ]
    }

    static func alert(_ alert: LoopAlert) -> JSON {
        [
            "kind": .string(alert.kind), "severity": .string(alert.severity.rawValue),
            "upstream": alert.upstream.map(JSON.string) ?? .null, "tenant": alert.tenant.map(JSON.string) ?? .null,
            "gateway": alert.gateway.map(JSON.string) ?? .null, "message": .string(alert.message),
            "since": time(alert.since),
        ]
    }

    static func budget(_ status: BudgetStatus) -> JSON {
        [
            "window": .string(status.budget.window.rawValue), "amount": number(status.budget.amount),
            "spent": number(status.spent), "projected": number(status.projected),
            "level": .string(status.level.rawValue),
            "soft": number(status.budget.softAmount), "throttle": number(status.budget.throttleAmount),
            "hard": number(status.budget.hardAmount), "window_end": time(status.windowEnd),
            "allowed_burn_rate_per_s": number(status.allowedBurnRatePerSecond),
        ]
    }

    static func audit(_ entry: AuditEntry) -> JSON {
        [
            "id": .int(entry.id), "at": time(milliseconds: entry.atMs), "actor": .string(entry.actor),
            "actor_role": entry.actorRole.map(JSON.string) ?? .null, "action": .string(entry.action),
            "subject": .string(entry.subject), "tenant": entry.tenant.map(JSON.string) ?? .null,
            "before": entry.before ?? .null, "after": entry.after ?? .null,
            "reason": entry.reason.map(JSON.string) ?? .null,
        ]
    }

    static func token(_ record: TokenRecord) -> JSON {
        [
            "id": .string(record.id), "name": .string(record.name), "role": .string(record.role),
            "created_at": time(milliseconds: record.createdMs), "created_by": .string(record.createdBy),
            "last_used_at": time(milliseconds: record.lastUsedMs), "revoked": .bool(record.isRevoked),
            "revoked_at": time(milliseconds: record.revokedMs),
            "revoked_by": record.revokedBy.map(JSON.string) ?? .null,
            "gateway_scope": record.gatewayScope.map(JSON.string) ?? .null,
        ]
    }

    static func latency(_ latency: LatencyPercentiles) -> JSON {
        [
            "p50_ms": number(latency.p50), "p95_ms": number(latency.p95), "p99_ms": number(latency.p99),
            "samples": .int(Int64(latency.samples)),
        ]
    }
}
