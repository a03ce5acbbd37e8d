//! `loadgen`: thousands of bot clients over TCP against a tessera server.
//!
//! One command runs a whole benchmark: with no `--server` it starts a server
//! in this process ([`embedded`]), connects `--bots` bots on pinned threads,
//! each one batched epoll loop over its bots' sockets ([`driver`],
//! [`event_loop`], [`bot`]), moves them by a [`scenario`], times
//! every update end to end ([`latency`]), merges the threads' histograms
//! ([`measure`]) and reports a live line, a summary table, JSON and charts
//! ([`report`], [`plot`]).
//!
//! Modules, from the command line down:
//! - [`cli`]: flags. [`run`]: one run, start to finish.
//! - [`server`]: embedded or remote server; [`embedded`], [`remote`]
//!   (admin `/metrics` scrape); [`cpu`]: thread CPU times.
//! - [`driver`]: bot threads, the shared plan and clock; [`event_loop`]:
//!   a thread's sockets, schedule and reports in one loop; [`bot`]: one
//!   bot's logic over a `tessera::client::ClientSession`.
//! - [`scenario`]: where bots go; [`latency`]: matching updates to sends;
//!   [`measure`]: histograms and counters.
//! - [`report`]: series, summary, JSON; [`plot`]: PNG charts; [`bands`]:
//!   figures per distance band.

pub mod bands;
pub mod bot;
pub mod cli;
pub mod cpu;
pub mod driver;
pub mod embedded;
pub mod event_loop;
pub mod latency;
pub mod measure;
pub mod own_track;
pub mod plot;
pub mod plot_tree;
pub mod remote;
pub mod report;
pub mod run;
pub mod scenario;
pub mod seats;
pub mod server;
pub mod tickets;
pub mod uring_loop;
