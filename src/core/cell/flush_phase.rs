//! When each observer of a cell flushes: the phase of its view batch within
//! the update period (`view.client_phases`), for `flush_every_ticks` > 1.
//!
//! Owns [`PhaseTable`]: one small entry per watch slot, dense, so a view
//! step lists the observers that flush without touching the watches. Must
//! not touch the observers, the AOI or the entities: `views` asks it which
//! slots flush at a step and tells it when a slot's owner changed.
//!
//! # Following the input ([`FlushPhases::Input`])
//! A client's own change set is built in the tick its inputs are applied
//! (`emit_syncs`). Under `Input` each observer flushes in the tick of the
//! period in which its owner's changes come: the batch answering an input
//! leaves right after it, so the client hears back within a tick, where a
//! fixed phase answers up to a period later (pinned loadgen at 10 Hz: the
//! input's ack RTT p50 67.6 -> 42.4 ms; `bench/README.md`, the
//! twenty-fifth round). The answer does not carry the TCP acknowledgement
//! of the input: Linux sends that on its own at the read unless the reply
//! follows within its 40 ms delay, and the answer leaves 25-75 ms after
//! the input arrived (the same round measured it).
//!
//! The rule: a slot starts at its spread phase; each owner change at a step
//! whose phase is not the slot's votes for that phase, and
//! [`SWITCH_AFTER`] votes in a row for the same one move the slot there
//! (an owner change at the slot's own phase clears the votes). Inputs
//! faster than the update rate, or at a jittery phase, do not settle on
//! one and leave the slot where it is. A slot flushes once a period, at
//! its turns (`every` steps apart); the two exceptions below keep that
//! rate: a late input's flush stands for its turn, and a move starts the
//! period afresh.
//!
//! # Moving
//! The vote that moves a slot is answered in its step: the period starts
//! again there. The gap before it is shorter than a period when the new
//! phase comes before the old turn (by the steps the inputs came early),
//! never longer. So a client is sent one batch a period, and a gap
//! shorter than the period comes only right after a late input's batch or
//! at a move (which needs [`SWITCH_AFTER`] inputs in a row).
//! (Until the thirty-fourth round a move only delayed: the first turn at
//! the new phase waited a whole period from the last flush, one gap of up
//! to `2 * every - 1` steps per move, 175 ms at 25 ms ticks and 10 Hz.)
//!
//! # A late input
//! A client that sends one input a period crosses tick edges with its
//! jitter: an input due in its slot's tick lands a tick later, the batch
//! of that tick has no answer for it, and the next one leaves a period
//! later (an own update gap of two periods where one was due, 200 ms at
//! 10 Hz). So a slot whose turn comes while its owner is active (it
//! changed within the last two periods) but has not changed since the
//! slot's last flush waits one step for the input, and flushes in the next
//! step whatever came. That flush stands for the turn: the next turn comes
//! a period after the turn, not after the flush, so the late input costs
//! a gap of a period and a step, then one of a period less a step, instead
//! of one of two periods. Idle owners and those whose inputs come faster
//! than the period are never waited for (README's main command at 10 Hz,
//! four pairs: own update gap p999 197.5-199.8 -> 151.2-151.8 ms, updates
//! a bot-second, latency and CPU unchanged; `bench/README.md`, the
//! twenty-sixth round). Until the thirty-fourth round the turn after the
//! late flush was skipped (a slot flushed at most once in `every` steps):
//! a gap of two periods less a step followed each late input (175 ms at
//! 25 ms ticks), and each late input cost the client a batch.
//!
//! # Across a migration
//! A migrated observer arrives right after its old cell's last batch
//! (`detach_observer` flushes it), and its client's inputs keep coming at
//! their phase. So a slot that takes a migrated watch waits for its
//! owner's first change instead of its spread turn, takes that change's
//! phase at once (no votes) and flushes in that step: the answer to the
//! first input in the new cell leaves with it, and the cadence the client
//! had goes on. Without the wait the slot started at its spread phase and
//! the votes moved it three inputs later, one longer gap each crossing
//! (README's main command at 10 Hz, the mean of each crossing's largest
//! gap: 110.1 ms under the votes alone, 107.5 with the wait, 106.8 under
//! spread; `bench/README.md`, the twenty-sixth round). Only
//! migrated watches adopt: clients that spawn together would all adopt
//! the one phase of their first inputs (the twenty-fifth round measured
//! 63 % of the batches in one tick of three), while migrations are spread
//! by the clients' own movement. If no change comes within `every` steps
//! the slot flushes at its spread turn and the votes take over. The first
//! answer may leave less than a period after the old cell's last batch:
//! one early batch a crossing, as the old cell's own detach flush is.

use super::view_params::FlushPhases;

/// Owner changes in a row at the same other phase that move a slot there.
pub(super) const SWITCH_AFTER: u8 = 3;

/// One watch slot's phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Phase {
    /// Once `moved`, the slot flushes at the steps where
    /// `(step + at) % every == 0`; before, at its spread phase.
    at: u16,
    moved: bool,
    /// The phase its owner's last changes came at, and how many in a row.
    vote: u16,
    streak: u8,
    /// The slot holds a watch.
    live: bool,
    /// A migrated watch that waits for its owner's first change (see
    /// "Across a migration").
    adopt: bool,
    /// The step of its last turn (low 32 bits, wrapping): of its last
    /// flush, or for a late input's flush the turn it waited from; a move
    /// or an adoption sets it a period back, so the slot flushes at once.
    last: u32,
    /// The step of its owner's last change (low 32 bits, wrapping).
    changed_at: u32,
    /// Its owner changed since its last flush.
    changed: bool,
    /// Its turn came with an active owner's input late: it flushes at the
    /// next step (see "A late input").
    deferred: bool,
}

/// The phase of every watch slot (see the module doc), and the slots that
/// flush at the step of the last [`PhaseTable::collect`].
#[derive(Clone, Debug, Default)]
pub(super) struct PhaseTable {
    slots: Vec<Phase>,
    /// The slots that flush at the last collected step, ascending.
    flushing: Vec<u32>,
}

/// The phase that flushes at `step`, one flush every `every` steps.
#[inline]
fn phase_at(step: u64, every: u64) -> u16 {
    debug_assert!((1..=u64::from(u16::MAX)).contains(&every));
    ((every - step % every) % every) as u16
}

impl Phase {
    /// The phase slot `i` (this entry) flushes at, one flush every `every`
    /// steps: its spread phase until its owner's inputs moved it.
    #[inline]
    fn of(&self, i: usize, every: u64) -> u16 {
        let at = if self.moved {
            u64::from(self.at)
        } else {
            i as u64
        };
        (at % every) as u16
    }
}

impl PhaseTable {
    /// Slot `slot` took a watch at `step`: it starts at the spread phase
    /// and may flush at its first turn; `migrated`, it waits for its
    /// owner's first change (see "Across a migration") or a period.
    pub fn insert(&mut self, slot: u32, step: u64, migrated: bool) {
        let i = slot as usize;
        if self.slots.len() <= i {
            self.slots.resize(i + 1, Phase::default());
        }
        self.slots[i] = Phase {
            live: true,
            adopt: migrated,
            // A migrated watch's last batch just left its old cell; any
            // other's longer ago than any period (`every` fits a u16).
            last: if migrated {
                step as u32
            } else {
                (step as u32).wrapping_sub(1 << 16)
            },
            changed_at: (step as u32).wrapping_sub(1 << 16),
            ..Phase::default()
        };
    }

    /// Slot `slot` lost its watch.
    pub fn remove(&mut self, slot: u32) {
        if let Some(p) = self.slots.get_mut(slot as usize) {
            p.live = false;
        }
    }

    /// The owner of slot `slot` changed at `step` (its inputs applied):
    /// under [`FlushPhases::Input`], a vote for the phase that flushes at
    /// `step` (see the module doc).
    #[inline]
    pub fn owner_changed(&mut self, mode: FlushPhases, slot: u32, step: u64, every: u64) {
        if mode != FlushPhases::Input || every <= 1 {
            return;
        }
        let i = slot as usize;
        let Some(p) = self.slots.get_mut(i) else {
            return;
        };
        let want = phase_at(step, every);
        (p.changed_at, p.changed) = (step as u32, true);
        if p.adopt {
            // A migrated watch's first change (it has not flushed here):
            // its phase, answered in this step.
            (p.at, p.moved, p.streak, p.adopt) = (want, true, 0, false);
            p.last = (step as u32).wrapping_sub(every as u32);
            return;
        }
        if want == p.of(i, every) {
            p.streak = 0;
            return;
        }
        if want == p.vote {
            p.streak = p.streak.saturating_add(1);
        } else {
            (p.vote, p.streak) = (want, 1);
        }
        if p.streak >= SWITCH_AFTER {
            // The move answers this change in its step, as an adopted
            // phase does: the period restarts here (see "Moving").
            (p.at, p.moved, p.streak) = (want, true, 0);
            p.last = (step as u32).wrapping_sub(every as u32);
        }
    }

    /// Lists the slots (of `len`) that flush at `step` under `mode`, one
    /// flush every `every` steps ([`PhaseTable::flushing`]); under `Input`
    /// each listed slot's flush is noted.
    pub fn collect(&mut self, mode: FlushPhases, step: u64, every: u64, len: usize) {
        let every = every.max(1);
        self.flushing.clear();
        let len = u32::try_from(len).expect("watch slots fit u32");
        match mode {
            // The slots `s` with `(step + s) % every == 0`: every `every`-th
            // one from the first.
            FlushPhases::Spread => {
                let first = u32::from(phase_at(step, every));
                let stride = usize::try_from(every).unwrap_or(usize::MAX);
                self.flushing.extend((first..len).step_by(stride));
            }
            FlushPhases::Aligned if step % every == 0 => self.flushing.extend(0..len),
            FlushPhases::Aligned => {}
            // Every slot every step: no phase to follow, nothing to wait
            // for (a migrated watch flushes at once).
            FlushPhases::Input if every == 1 => self.flushing.extend(0..len),
            FlushPhases::Input => {
                let (want, now) = (phase_at(step, every), step as u32);
                for (i, p) in self.slots.iter_mut().enumerate().take(len as usize) {
                    let turn = p.live
                        && p.of(i, every) == want
                        && u64::from(now.wrapping_sub(p.last)) >= every;
                    // An owner that sent within the last two periods but
                    // not since this slot's last flush: its input is late
                    // (it crossed a tick edge); the turn waits a step.
                    let active = u64::from(now.wrapping_sub(p.changed_at)) <= 2 * every;
                    if turn && active && !p.changed && !p.deferred {
                        p.deferred = true;
                        continue;
                    }
                    // A turn, or the step after a late input's wait. (A
                    // migrated watch that met no change in a period
                    // flushes at its spread turn; the votes go on.)
                    if turn || (p.live && p.deferred) {
                        // A late input's flush is its turn's, a step late:
                        // the period stays on the turns' grid (see "A late
                        // input").
                        let last = if turn { now } else { now.wrapping_sub(1) };
                        (p.last, p.adopt, p.changed, p.deferred) = (last, false, false, false);
                        self.flushing.push(i as u32);
                    }
                }
            }
        }
    }

    /// The slots that flush at the last collected step, ascending.
    #[inline]
    pub fn flushing(&self) -> &[u32] {
        &self.flushing
    }

    /// The phase slot `slot` flushes at, one flush every `every` steps
    /// (tests).
    #[cfg(test)]
    pub fn phase(&self, slot: u32, every: u64) -> Option<u16> {
        let i = slot as usize;
        (self.slots.get(i).filter(|p| p.live)).map(|p| p.of(i, every))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(slots: u32) -> PhaseTable {
        let mut t = PhaseTable::default();
        for s in 0..slots {
            t.insert(s, 0, false);
        }
        t
    }

    fn flushes(
        t: &mut PhaseTable,
        mode: FlushPhases,
        step: u64,
        every: u64,
        len: usize,
    ) -> Vec<u32> {
        t.collect(mode, step, every, len);
        t.flushing().to_vec()
    }

    #[test]
    fn spread_and_aligned_list_the_slots_their_rule_names() {
        let mut t = table(10);
        for every in 1..5u64 {
            for step in 0..9u64 {
                let spread = flushes(&mut t, FlushPhases::Spread, step, every, 10);
                let want: Vec<u32> = (0..10)
                    .filter(|&s| (step + u64::from(s)) % every == 0)
                    .collect();
                assert_eq!(spread, want, "spread, step {step} every {every}");
                let aligned = flushes(&mut t, FlushPhases::Aligned, step, every, 10);
                let all: Vec<u32> = if step % every == 0 {
                    (0..10).collect()
                } else {
                    vec![]
                };
                assert_eq!(aligned, all, "aligned, step {step} every {every}");
            }
        }
    }

    #[test]
    fn input_starts_spread_and_each_slot_flushes_once_a_period() {
        let every = 3;
        let mut t = table(7);
        let mut count = [0u32; 7];
        for step in 0..30u64 {
            let spread = flushes(&mut t, FlushPhases::Spread, step, every, 7);
            let input = flushes(&mut t, FlushPhases::Input, step, every, 7);
            assert_eq!(input, spread, "step {step}: no input, the spread phases");
            for s in input {
                count[s as usize] += 1;
            }
        }
        assert_eq!(count, [10; 7]);
        t.remove(4);
        assert!(
            !flushes(&mut t, FlushPhases::Input, 32, every, 7).contains(&4),
            "a free slot"
        );
    }

    /// An owner whose changes come at one other phase moves its slot there
    /// after `SWITCH_AFTER` of them; the move delays, never hastens, a flush.
    #[test]
    fn a_steady_input_moves_the_phase_and_the_rate_holds() {
        let every = 2;
        let mut t = table(1);
        let mut flushed = Vec::new();
        for step in 0..40u64 {
            // The owner's inputs come at the odd steps; slot 0 starts even.
            if step % 2 == 1 {
                t.owner_changed(FlushPhases::Input, 0, step, every);
            }
            if flushes(&mut t, FlushPhases::Input, step, every, 1) == [0] {
                flushed.push(step);
            }
        }
        assert_eq!(
            t.phase(0, every),
            Some(phase_at(1, every)),
            "moved to the odd steps"
        );
        // The move answers its vote at once: one gap shorter than a
        // period (the inputs came a step before the old turn), none longer.
        assert!(
            flushed.windows(2).all(|w| w[1] - w[0] <= every),
            "{flushed:?}"
        );
        assert!(
            flushed.windows(2).filter(|w| w[1] - w[0] != every).count() == 1,
            "{flushed:?}"
        );
        assert!(
            flushed.iter().rev().take(10).all(|s| s % 2 == 1),
            "{flushed:?}"
        );
        // Under spread the votes are ignored.
        let mut s = table(1);
        for step in (1..20).step_by(2) {
            s.owner_changed(FlushPhases::Spread, 0, step, every);
        }
        assert_eq!(s.phase(0, every), Some(0));
    }

    /// A migrated watch answers its owner's first change in that step and
    /// keeps that phase; one that meets no change flushes a period after it
    /// came, at its spread turn, and the votes take over.
    #[test]
    fn a_migrated_watch_takes_its_first_changes_phase() {
        let every = 4;
        let mut t = table(3);
        // Slot 1 (spread phase: steps 3, 7, ...) takes a migrated watch at
        // step 9; its owner's inputs come at steps 10, 14, 18, ...
        t.remove(1);
        t.insert(1, 9, true);
        let mut flushed = Vec::new();
        for step in 9..30u64 {
            if step >= 10 && (step - 10) % every == 0 {
                t.owner_changed(FlushPhases::Input, 1, step, every);
            }
            if flushes(&mut t, FlushPhases::Input, step, every, 3).contains(&1) {
                flushed.push(step);
            }
        }
        assert_eq!(flushed, [10, 14, 18, 22, 26], "answered with each input");
        // Without changes: nothing before a period has passed, then the
        // spread turn (step 15), then every period.
        let mut q = table(3);
        q.remove(1);
        q.insert(1, 9, true);
        let quiet: Vec<u64> = (9..24u64)
            .filter(|&step| flushes(&mut q, FlushPhases::Input, step, every, 3).contains(&1))
            .collect();
        assert_eq!(quiet, [15, 19, 23]);
        // Its first change after that flush is a vote like any other.
        q.owner_changed(FlushPhases::Input, 1, 24, every);
        assert_eq!(q.phase(1, every), Some(1), "one vote moves nothing");
        // Sent every step, a migrated watch flushes at once (no wait).
        let mut e = table(3);
        e.remove(1);
        e.insert(1, 9, true);
        assert!(flushes(&mut e, FlushPhases::Input, 9, 1, 3).contains(&1));
        // A watch that did not migrate never adopts.
        let mut f = table(3);
        f.remove(1);
        f.insert(1, 9, false);
        f.owner_changed(FlushPhases::Input, 1, 10, every);
        assert_eq!(f.phase(1, every), Some(1), "spawned: the votes decide");
    }

    /// An input that comes a step late (across a tick edge) is answered in
    /// its step, not a period later; an idle owner or one faster than the
    /// period is never waited for.
    #[test]
    fn a_late_input_is_waited_for_one_step() {
        let every = 2;
        let run = |inputs: &dyn Fn(u64) -> bool| {
            let mut t = table(1);
            let mut flushed = Vec::new();
            for step in 0..20u64 {
                if inputs(step) {
                    t.owner_changed(FlushPhases::Input, 0, step, every);
                }
                if flushes(&mut t, FlushPhases::Input, step, every, 1) == [0] {
                    flushed.push(step);
                }
            }
            flushed
        };
        // Inputs at the even steps (the slot's), the one due at 8 late: its
        // flush stands for the turn at 8, and the turn at 10 is kept.
        let late = run(&|s| (s % 2 == 0 && s != 8) || s == 9);
        assert_eq!(late, [0, 2, 4, 6, 9, 10, 12, 14, 16, 18]);
        assert_eq!(late.len(), 10, "a batch a period, as with no late input");
        assert_eq!(run(&|_| false), [0, 2, 4, 6, 8, 10, 12, 14, 16, 18], "idle");
        assert_eq!(run(&|_| true), [0, 2, 4, 6, 8, 10, 12, 14, 16, 18], "fast");
    }

    /// At any update rate a late input costs one gap a step longer than
    /// the period and one a step shorter, and no batch: the turn after the
    /// late flush is kept (it was skipped until the thirty-fourth round,
    /// a gap of two periods less a step).
    #[test]
    fn a_late_input_costs_a_step_and_no_batch_at_any_rate() {
        for every in 2..=6u64 {
            let mut t = table(1);
            let mut flushed = Vec::new();
            for step in 0..10 * every {
                // Slot 0's turns are the multiples of `every`; the input due
                // at the fourth comes a step late.
                let due = step % every == 0 && step != 4 * every;
                if due || step == 4 * every + 1 {
                    t.owner_changed(FlushPhases::Input, 0, step, every);
                }
                if flushes(&mut t, FlushPhases::Input, step, every, 1) == [0] {
                    flushed.push(step);
                }
            }
            assert_eq!(flushed.len(), 10, "every {every}: {flushed:?}");
            let gaps: Vec<u64> = flushed.windows(2).map(|w| w[1] - w[0]).collect();
            let mut want = vec![every; 9];
            (want[3], want[4]) = (every + 1, every - 1);
            assert_eq!(gaps, want, "every {every}: {flushed:?}");
        }
    }

    #[test]
    fn inputs_at_the_phase_or_faster_than_the_period_leave_it() {
        let every = 2;
        let mut t = table(1);
        for step in 0..40u64 {
            // Every step: one vote at the slot's phase, one at the other.
            t.owner_changed(FlushPhases::Input, 0, step, every);
        }
        assert_eq!(t.phase(0, every), Some(0), "alternating votes never settle");
        let mut j = table(1);
        // Jitter: two votes for phase 1, then one at the slot's own phase.
        for round in 0..10u64 {
            let base = round * 12;
            j.owner_changed(FlushPhases::Input, 0, base + 3, 4);
            j.owner_changed(FlushPhases::Input, 0, base + 7, 4);
            j.owner_changed(FlushPhases::Input, 0, base + 8, 4);
        }
        assert_eq!(j.phase(0, 4), Some(0), "fewer than SWITCH_AFTER in a row");
    }
}
