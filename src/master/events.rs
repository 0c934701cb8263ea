//! What the loop reacts to ([`Event`]), the answers of the database tasks its parts start
//! ([`Internal`]), and the channels they arrive on ([`Inbox`]).

use std::time::{Duration, Instant};

use drover_broker::listener::Wakes;
use drover_broker::{BrokerError, Lease, Settle};
use drover_supervisor::WorkerEvent;
use tokio::sync::mpsc;

use crate::config::RunConfig;
use crate::master::pools::PoolId;
use crate::process::control::Request;
use crate::process::signals::Sig;

use super::timers::Tick;

/// Everything the loop reacts to, from every source; `Master::handle` sends each to the part
/// that owns it.
pub(super) enum Event {
    /// A worker's frame, bad input or exit, or a zygote's event.
    Worker(WorkerEvent),
    /// A database task the loop started has finished.
    Internal(Internal),
    /// A command from the control socket.
    Control(Request),
    /// NOTIFY from the insert trigger, or a committed release: jobs may be claimable.
    Wake,
    /// NOTIFY from `drover.paused_queues`: a queue was paused, its pause changed, or it resumed.
    PausesChanged,
    /// NOTIFY from `drover.request_reload`: a fleet restart asked some master to reload.
    ReloadAsked,
    /// NOTIFY from the console (`drover.stop_requests`, `drover.pool_sizes`): an operator asked
    /// to stop a running job, or set a pool's size.
    ConsoleAsked,
    /// NOTIFY from `drover.limit_wakes`, or the admitter's timer: a key may be able to admit a
    /// job waiting for its limits.
    LimitsWoken,
    /// A duty of the clock (see `timers`).
    Tick(Tick),
    /// A signal (see `crate::process::signals`).
    Signal(Sig),
}

/// A claim's answer, as the claimer's task sends it back.
pub(super) struct ClaimAnswer {
    /// The pool it claimed for.
    pub pool: PoolId,
    /// The jobs leased (or why none could be).
    pub result: Result<drover_broker::Claimed, BrokerError>,
    /// How many it asked for: a full claim may have left more behind.
    pub limit: usize,
    /// When it was sent: the leases count from then.
    pub at: Instant,
    /// The acks that rode with it (`riding_acks`), as the settler gave them.
    pub acks: Vec<Settle>,
}

/// A renewal's answer, as the lease keeper's task sends it back.
pub(super) struct RenewAnswer {
    /// The leases it renewed (or tried to).
    pub asked: Vec<Lease>,
    /// When it was sent: renewed leases count from then.
    pub at: Instant,
    /// What became of each lease: renewed, completed in its job's own transaction, or busy (a
    /// lease in none of them was lost).
    pub result: Result<drover_broker::Renewed, BrokerError>,
    /// What claims whose answer was lost leased to this master (`claim_tokens` in the broker).
    pub unanswered: Result<Vec<Lease>, BrokerError>,
}

/// Results of the database tasks the loop started.
pub(super) enum Internal {
    Claimed(ClaimAnswer),
    NextDue {
        pool: PoolId,
        /// How long until the next delayed job is due, by the database's clock.
        due: Option<Duration>,
    },
    Renewed(RenewAnswer),
    /// An admission pass ended: how many jobs it moved into `drover.jobs`, and when to look again.
    Admitted(Result<drover_broker::Admitted, BrokerError>),
    /// This master's fleet restart requests were read (the newest made of it).
    FleetReload(Result<i64, BrokerError>),
    /// The requests to stop jobs this master holds were read.
    StopRequests(Result<Vec<drover_broker::StopRequest>, BrokerError>),
    /// The pool sizes the console set for this master were read.
    PoolSizes(Result<Vec<drover_broker::PoolSize>, BrokerError>),
    /// A reap pass ended: whether its heartbeat found this master's row gone and registered it
    /// again, and how many expired leases it took back.
    Reaped {
        registered_again: bool,
        reaped: u64,
    },
    /// A batch of the settler was written, or a settle in it refused (`settler::BatchReport`).
    Settles(super::settler::BatchReport),
    Compacted(Result<Vec<drover_broker::TableCompaction>, BrokerError>),
    /// A reload re-read the configuration (`None`: nothing to re-read, roll the workers only).
    Reloaded(Result<Option<Box<RunConfig>>, String>),
    /// `drover.paused_queues` was read.
    QueuePauses(Result<Vec<drover_broker::PausedQueue>, BrokerError>),
    /// Every `withdraw` frame of a round for a newly paused queue is written.
    Withdrawn {
        queue: String,
        round: u64,
    },
    /// The pauses this master holds were confirmed in its node row (or could not be).
    PausesConfirmed {
        versions: Vec<i64>,
        result: Result<(), BrokerError>,
    },
    /// An autoscaling pool's queues' backlog was read.
    Backlog {
        /// The balancer's pool, by its configured name (a reload rebuilds the balancers).
        balancer: String,
        result: Result<Vec<(String, i64)>, BrokerError>,
    },
}

/// Where events come from: the workers, the loop's own database tasks, the control socket, the
/// LISTEN connection.
pub(super) struct Inbox {
    /// Worker events from every pool's tasks.
    pub workers: mpsc::UnboundedReceiver<WorkerEvent>,
    /// Where pools' worker events go (for pools a reload adds).
    pub workers_tx: mpsc::UnboundedSender<WorkerEvent>,
    /// Results of database tasks.
    pub internal: mpsc::UnboundedReceiver<Internal>,
    /// What a database task sends its result with.
    pub internal_tx: mpsc::UnboundedSender<Internal>,
    /// Commands from the control socket.
    pub control: mpsc::UnboundedReceiver<Request>,
    /// What the LISTEN connection (and committed releases) wake: claims (`jobs`), a re-read of
    /// the paused queues (`pauses`), a look at this master's fleet restart requests (`reloads`).
    pub wakes: Wakes,
}

impl Inbox {
    pub(super) fn new(
        (workers_tx, workers): (
            mpsc::UnboundedSender<WorkerEvent>,
            mpsc::UnboundedReceiver<WorkerEvent>,
        ),
        control: mpsc::UnboundedReceiver<Request>,
        wakes: Wakes,
    ) -> Inbox {
        let (internal_tx, internal) = mpsc::unbounded_channel();
        Inbox {
            workers,
            workers_tx,
            internal,
            internal_tx,
            control,
            wakes,
        }
    }
}
