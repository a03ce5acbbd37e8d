//! What a bot thread's loop keeps of its bots whatever its I/O: a seat
//! per bot, the schedule of due ticks, the bots with output to write, the
//! bots that ended, the ramp's connect times, and the report once a
//! second.
//!
//! Shared by the epoll loop ([`crate::event_loop`]) and the io_uring loop
//! ([`crate::uring_loop`]); each has its own seat (its socket and what is
//! in flight) behind [`Seat`]. Must not touch a socket.
//!
//! # Limits
//! The schedule holds at most two entries per bot (its live tick, and one
//! stale entry left behind when a Welcome brings the tick forward); it is
//! allocated once, for that bound, as are the dirty and ended lists (a bot
//! is on each at most once).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::mpsc::Sender;
use std::time::Duration;

use tessera::core::time::Time;

use crate::bot::{Bot, Phase};
use crate::driver::{Plan, Report, ThreadCtx};

/// How often a thread reports its measurements.
pub const REPORT_PERIOD: Duration = Duration::from_secs(1);

/// What the schedule and the dirty list keep on a seat.
#[derive(Clone, Copy, Debug)]
pub struct Marks {
    /// On the dirty list.
    pub queued: bool,
    /// The time of this bot's live schedule entry.
    pub scheduled: Time,
    /// On the ended list (once: a loop may drive an ended bot again
    /// before it takes the list, as the io_uring loop does for each of
    /// its last completions).
    pub ended: bool,
}

impl Default for Marks {
    fn default() -> Self {
        Marks {
            queued: false,
            scheduled: Time(u64::MAX),
            ended: false,
        }
    }
}

/// One bot and its socket, as a loop keeps them.
pub trait Seat {
    /// The bot.
    fn bot(&self) -> &Bot;
    /// The bot, to drive.
    fn bot_mut(&mut self) -> &mut Bot;
    /// The marks.
    fn marks(&mut self) -> &mut Marks;
    /// Output may be handed to the socket now (connected, and no earlier
    /// write waiting for room or in flight).
    fn can_send(&self) -> bool;
}

/// A thread's bots (see the module doc).
pub struct Seats<C> {
    /// The thread's `k`-th bot is `slots[k]`: `None` before its ramp slot
    /// and after its socket closed.
    pub slots: Vec<Option<C>>,
    /// Global bot index of each slot.
    pub ids: Vec<u32>,
    /// Due ticks: `(time, slot)`, earliest first.
    schedule: BinaryHeap<Reverse<(Time, usize)>>,
    /// Slots with output to write this round.
    pub dirty: Vec<usize>,
    /// Slots whose bot ended this round (each once).
    pub ended: Vec<usize>,
    /// The next slot to connect.
    pub next_connect: usize,
}

impl<C: Seat> Seats<C> {
    /// Thread `thread`'s share of the plan's bots: bot `i` where `i %
    /// threads == thread`.
    pub fn new(plan: &Plan, thread: usize) -> Seats<C> {
        let ids: Vec<u32> = (0..plan.bots)
            .filter(|i| *i as usize % plan.threads == thread)
            .collect();
        let n = ids.len();
        Seats {
            slots: (0..n).map(|_| None).collect(),
            ids,
            schedule: BinaryHeap::with_capacity(2 * n),
            dirty: Vec::with_capacity(n),
            ended: Vec::with_capacity(n),
            next_connect: 0,
        }
    }

    /// After `slot`'s bot was driven: schedule its next tick, queue its
    /// output, note its end.
    pub fn after(&mut self, slot: usize) {
        let Some(c) = self.slots[slot].as_mut() else {
            return;
        };
        if c.bot().phase() == Phase::Done {
            if !c.marks().ended {
                c.marks().ended = true;
                self.ended.push(slot);
            }
            return;
        }
        let due = c.bot().next_tick();
        if due != c.marks().scheduled {
            c.marks().scheduled = due;
            self.schedule.push(Reverse((due, slot)));
        }
        if !c.marks().queued && c.can_send() && !c.bot().transmit().is_empty() {
            c.marks().queued = true;
            self.dirty.push(slot);
        }
    }

    /// The earliest scheduled tick (maybe stale).
    pub fn next_due(&self) -> Option<Time> {
        self.schedule.peek().map(|Reverse((t, _))| *t)
    }

    /// Runs every bot whose tick is due at `now` ([`Bot::on_tick`]), then
    /// schedules it and queues its output. Stale entries (a tick brought
    /// forward) and ended bots are skipped.
    pub fn tick_due(&mut self, ctx: &mut ThreadCtx, now: Time) {
        while let Some(&Reverse((t, slot))) = self.schedule.peek() {
            if t > now {
                return;
            }
            self.schedule.pop();
            let Some(c) = self.slots[slot].as_mut() else {
                continue;
            };
            if c.marks().scheduled != t || c.bot().phase() == Phase::Done {
                continue;
            }
            c.bot_mut().on_tick(ctx, now);
            self.after(slot);
        }
    }

    /// When the bot in the next slot to connect is due to (its ramp slot).
    pub fn next_connect_at(&self, plan: &Plan) -> Option<Time> {
        self.ids.get(self.next_connect).map(|&i| start_of(plan, i))
    }
}

/// Sends thread `thread`'s report if its second (`next`) has come, the
/// last one if `done`; true when the loop should stop (it was the last,
/// or the main thread is gone).
pub fn report_due(
    tx: &Sender<Report>,
    ctx: &mut ThreadCtx,
    (thread, now): (usize, Time),
    next: &mut Time,
    done: bool,
) -> bool {
    if now < *next {
        return false;
    }
    *next = *next + REPORT_PERIOD;
    let report = Report {
        thread,
        at: now,
        interval: std::mem::replace(&mut ctx.interval, ctx.pool.take()),
        last: done,
    };
    tx.send(report).is_err() || done
}

/// Bot `i`'s ramp slot: bots connect evenly over the plan's ramp.
fn start_of(plan: &Plan, i: u32) -> Time {
    Time(0)
        + plan
            .ramp
            .mul_f64(f64::from(i) / f64::from(plan.bots.max(1)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::Clock;
    use crate::latency::{EntityCache, MoveBook};
    use crate::measure::IntervalPool;
    use std::sync::Arc;
    use tessera::core::entity::TypeRegistry;

    fn ctx() -> ThreadCtx {
        let plan = Arc::new(crate::run::tests::tests_plan(1.0));
        let pool = Arc::new(IntervalPool::default());
        ThreadCtx {
            registry: Arc::new(TypeRegistry::with_builtins()),
            interval: pool.take(),
            pool,
            cache: EntityCache::default(),
            book: Arc::new(MoveBook::new(plan.bots as usize)),
            plan,
            clock: Clock::start(),
        }
    }

    struct Fake {
        bot: Bot,
        marks: Marks,
    }

    impl Seat for Fake {
        fn bot(&self) -> &Bot {
            &self.bot
        }
        fn bot_mut(&mut self) -> &mut Bot {
            &mut self.bot
        }
        fn marks(&mut self) -> &mut Marks {
            &mut self.marks
        }
        fn can_send(&self) -> bool {
            true
        }
    }

    /// A bot that ended and is driven again before the loop takes the
    /// ended list (the io_uring loop settles each of its last completions)
    /// is listed once: the list keeps its bound of one entry per bot.
    #[test]
    fn an_ended_bot_is_listed_once() {
        let mut ctx = ctx();
        let plan = ctx.plan.clone();
        let mut seats: Seats<Fake> = Seats::new(&plan, 0);
        let bot = Bot::new(&ctx, 0, Time(0)).expect("a bot");
        seats.slots[0] = Some(Fake {
            bot,
            marks: Marks::default(),
        });
        seats.after(0);
        assert!(seats.ended.is_empty(), "running");
        assert_eq!(seats.next_due(), Some(Time(0) + plan.handshake_timeout));
        if let Some(f) = seats.slots[0].as_mut() {
            f.bot.connect_failed(&mut ctx);
        }
        seats.after(0);
        seats.after(0);
        assert_eq!(seats.ended, [0], "once");
    }
}
