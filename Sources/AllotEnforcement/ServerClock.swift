import AllotProtocol

/// Allot's clock as a gateway measures it against its own, on the answers to its polls (`Allot-Server-Time`), and how
/// Allot's instants (a lease's `expires_at`, a burst credit's) are read with it.
///
/// A lease runs until Allot's clock reaches its `expires_at`, whatever the gateway's clock reads (outside evaluation
/// round 40, F10: Allot's clock stepped back 120 s, its loop waited for it to come round, and gateways judging leases
/// on their own clocks fell to their floors; a gateway whose clock ran ahead of Allot's by more than a lease took
/// every snapshot as expired). Trust in a measure is bounded (review of the change, H1):
/// - clocks within a second of each other are taken as in step (a measure is late by the answer's way back), with a
///   margin so that a gateway about a second off does not flip between the two;
/// - a measure beyond an hour is not believed (a stray answer, a server booted with a dead clock battery), unless it
///   agrees with the offset already measured, as a step of the gateway's own clock moved it (second review, H-1: a
///   gateway whose clock stepped back two hours refused every later measure and sat on its floors);
/// - a lease runs at most its length (`expires_at − generated_at`) and the longest long-poll (60 s, in which a live
///   Allot answers again) beyond the last answer believed, by the gateway's clock: an answer dated in the past cannot
///   keep a lease alive while Allot is silent, nor can a gateway clock behind Allot's by more than an hour.
struct ServerClock: Sendable, Equatable {
    /// Allot's clock minus the gateway's, seconds, as last measured; nil before a measure, or from a server that sends
    /// no time.
    var measured: Double?
    /// What Allot's instants are read with: ``measured`` once it is beyond ``enterTolerance`` (and until it is back
    /// within ``leaveTolerance``), else 0, so that clocks in step, and transports that send no time, change nothing.
    var offset = 0.0
    /// The gateway's instant of the last measure believed.
    var answeredAt: Double?
    /// The offset last reported (``GatewayEvent/serverClock(offset:)``).
    var reported = 0.0

    /// Beyond this (seconds) Allot's clock is read with the measure.
    static let enterTolerance = 1.0
    /// Back within this, clocks are taken as in step again.
    static let leaveTolerance = 0.5
    /// A measure further off than this (seconds) is not believed: the clock stays as it was.
    static let believable = 3_600.0
    /// The longest a live Allot takes to answer a poll again (seconds): the longest long-poll, SPEC 7.
    static let longestPoll = 60.0
    /// How close to the offset already measured a measure beyond ``believable`` must be to be believed (seconds).
    static let agreement = 60.0

    /// The clock after an answer that arrived at `now` with a measure (nil: the answer carried no time, and Allot's
    /// instants are read on the gateway's clock again). A measure not believed changes nothing but the time of the last
    /// answer, which bounds the lease.
    func measuring(_ measure: Double?, at now: Double) -> ServerClock {
        var next = self
        next.answeredAt = now
        guard let measure else {
            next.measured = nil
            next.offset = 0
            return next
        }
        guard measure.isFinite,
            abs(measure) <= Self.believable || measured.map({ abs(measure - $0) <= Self.agreement }) == true
        else { return next }
        next.measured = measure
        next.offset = Self.offset(for: measure, applying: offset != 0)
        return next
    }

    /// The offset read for a measure, with the margin between entering and leaving.
    static func offset(for measure: Double, applying: Bool) -> Double {
        abs(measure) > (applying ? leaveTolerance : enterTolerance) ? measure : 0
    }

    /// Allot's clock at the gateway's `now`.
    func serverNow(_ now: Double) -> Double { now + offset }

    /// When `snapshot`'s lease ends, on the gateway's clock: when Allot's clock reaches `expires_at`, and at most its
    /// length and ``longestPoll`` past the last answer believed (none before a first answer: an in-process transport).
    func leaseEnd(_ snapshot: Snapshot) -> Double {
        let end = snapshot.expiresAt - offset
        guard let answeredAt else { return end }
        return min(end, answeredAt + snapshot.leaseSeconds + Self.longestPoll)
    }

    /// The gateway's clock stepped by `step` (``EnforcerState/noticeClock(_:monotonic:forward:effects:)``; back when
    /// negative): Allot's is that much further from it (until the next answer measures it again). A step forward is
    /// seen only by a ``Gateway`` on the system clock; otherwise, until the next answer, a lease ends early by it.
    mutating func gatewayStepped(by step: Double) {
        // The last answer moves back with a step back, not forward with a step forward: a lease still ends at most its
        // length and 60 s of the gateway's own clock after the last answer, so a VM paused and restored, whose steady
        // clock stood still while the wall clock was put right (a step forward to it), is not kept on a lease it held
        // before the pause (review of session 57, M1).
        if step < 0 { answeredAt = answeredAt.map { $0 + step } }
        guard let measured else { return }
        self.measured = measured - step
        offset = Self.offset(for: measured - step, applying: offset != 0)
    }

    /// The offset to report, when it moved by more than ``enterTolerance`` since the last report or came into or out of
    /// use; nil otherwise.
    mutating func report() -> Double? {
        guard abs(offset - reported) > Self.enterTolerance || (offset == 0) != (reported == 0) else { return nil }
        reported = offset
        return offset
    }
}
