//! The io_uring loop's unsafe parts exercised directly: the provided buffer
//! ring filled, consumed by multishot receives and refilled many times over
//! (more receives than buffers), sends from the connections' own buffers,
//! back-pressure through the spill, a drop with operations in flight, and
//! port slots reused with the registered file table (checked against the
//! ring's fdinfo) and without.

use super::*;
use crate::shard::port::{ConnId, PortEvent, PortParams};
use std::io::{Read, Write};

fn params() -> (PortParams, IoParams) {
    let port = PortParams {
        inbound_bytes_max: 4096,
        read_batch_bytes: 4096,
        ..PortParams::default()
    };
    let io = IoParams {
        backend: crate::runtime::gateway_io::IoBackend::IoUring,
        uring_entries: 64,
        uring_buffers: 64,
        uring_buffer_bytes: 256,
        uring_files: 64,
    };
    (port, io)
}

fn setup() -> (UringIo, Rc<RefCell<ClientPort>>, SocketAddr) {
    let (pp, io) = params();
    setup_with(pp, &io)
}

fn setup_with(pp: PortParams, io: &IoParams) -> (UringIo, Rc<RefCell<ClientPort>>, SocketAddr) {
    let (listener, addr) =
        crate::runtime::gateway_io::bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
    let port = Rc::new(RefCell::new(ClientPort::attached(pp)));
    let handoffs = Arc::new(Handoffs::new(1, 4));
    let gw = UringIo::start(listener, port.clone(), (handoffs, 0), io).expect("io_uring here");
    (gw, port, addr)
}

fn pump_until(gw: &mut UringIo, mut cond: impl FnMut(&mut UringIo) -> bool) {
    let t0 = Instant::now();
    while !cond(gw) {
        assert!(t0.elapsed() < Duration::from_secs(10), "timed out");
        gw.pump(Instant::now());
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn the_buffer_ring_goes_round_and_sends_leave_from_their_own_buffers() {
    let (mut gw, port, addr) = setup();
    let mut clients: Vec<TcpStream> = (0..3)
        .map(|_| TcpStream::connect(addr).expect("connect"))
        .collect();
    let mut conns = Vec::new();
    pump_until(&mut gw, |_| {
        while let Some(ev) = port.borrow_mut().poll_event() {
            if let PortEvent::Opened { conn, .. } = ev {
                conns.push(conn);
            }
        }
        conns.len() == 3
    });
    // More receives than buffers: 64 buffers, 3 x 100 writes of 52 bytes,
    // consumed as they come.
    let mut got = 0usize;
    for round in 0..100u8 {
        for c in &mut clients {
            c.write_all(&[round; 52]).expect("write");
        }
        pump_until(&mut gw, |_| {
            let mut p = port.borrow_mut();
            for &conn in &conns {
                let n = p.input(conn).len();
                assert!(p
                    .input(conn)
                    .iter()
                    .all(|&b| b == round || b == round.wrapping_sub(1)));
                p.consume(conn, n);
                got += n;
            }
            got == 3 * 52 * (usize::from(round) + 1)
        });
    }
    port.borrow().verify();
    // A send per connection, the app queueing more while it is in flight.
    for &conn in &conns {
        port.borrow_mut().send(conn, b"hello").expect("open");
    }
    gw.pump(Instant::now());
    for &conn in &conns {
        port.borrow_mut().send(conn, b" world").expect("open");
    }
    pump_until(&mut gw, |_| {
        conns.iter().all(|&c| port.borrow().queued(c) == 0)
    });
    for c in &mut clients {
        let mut back = [0u8; 11];
        c.read_exact(&mut back).expect("read");
        assert_eq!(&back, b"hello world");
    }
    port.borrow().verify();
}

#[test]
fn a_full_port_spills_and_pauses_then_resumes_in_order() {
    let (mut gw, port, addr) = setup();
    let mut c = TcpStream::connect(addr).expect("connect");
    let mut conn = None;
    pump_until(&mut gw, |_| {
        if let Some(PortEvent::Opened { conn: id, .. }) = port.borrow_mut().poll_event() {
            conn = Some(id);
        }
        conn.is_some()
    });
    let conn = conn.expect("opened");
    // Three times the port's bound, never consumed at first.
    let sent: Vec<u8> = (0..3 * 4096u32).map(|i| (i % 251) as u8).collect();
    c.write_all(&sent).expect("write");
    pump_until(&mut gw, |_| port.borrow().input(conn).len() == 4096);
    for _ in 0..20 {
        gw.pump(Instant::now());
    }
    assert_eq!(port.borrow().input(conn).len(), 4096, "held at the bound");
    let mut got = Vec::new();
    pump_until(&mut gw, |_| {
        let mut p = port.borrow_mut();
        got.extend_from_slice(p.input(conn));
        let n = p.input(conn).len();
        p.consume(conn, n);
        got.len() == sent.len()
    });
    assert_eq!(got, sent, "every byte, in order");
    port.borrow().verify();
}

/// Opens one connection; returns its client socket and port id.
fn open_one(
    gw: &mut UringIo,
    port: &Rc<RefCell<ClientPort>>,
    addr: SocketAddr,
) -> (TcpStream, ConnId) {
    let c = TcpStream::connect(addr).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut conn = None;
    pump_until(gw, |_| {
        while let Some(ev) = port.borrow_mut().poll_event() {
            if let PortEvent::Opened { conn: id, .. } = ev {
                conn = Some(id);
            }
        }
        conn.is_some()
    });
    (c, conn.expect("opened"))
}

/// Pumps (taking the port's events) until `conn` is closed and its socket
/// released.
fn pump_until_released(gw: &mut UringIo, port: &Rc<RefCell<ClientPort>>, conn: ConnId) {
    pump_until(gw, |gw| {
        while port.borrow_mut().poll_event().is_some() {}
        let p = port.borrow();
        !p.is_open(conn) && p.io_live() == 0 && gw.conns.iter().flatten().count() == 0
    });
}

#[test]
fn the_receives_that_end_connections_give_their_buffers_back() {
    // Four provided buffers, and four times as many connections ending by
    // the peer's EOF (a client that closes; a Bye answered by an app
    // close, the client closing after the server's FIN): the receive
    // completion that reports the EOF carries a buffer too. Kept, each
    // ending would take one buffer from the ring for good, and once it is
    // empty no connection's input is read any more (multishot receives end
    // in ENOBUFS at once, every pump).
    let (pp, mut io) = params();
    io.uring_buffers = 4;
    let (mut gw, port, addr) = setup_with(pp, &io);
    for round in 0..16u8 {
        let (mut c, conn) = open_one(&mut gw, &port, addr);
        c.write_all(&[round; 8]).expect("write");
        pump_until(&mut gw, |_| port.borrow().input(conn).len() == 8);
        port.borrow_mut().consume(conn, 8);
        if round % 2 == 0 {
            drop(c); // the peer closes first
        } else {
            // The app answers and closes (lingering: FIN, then drain
            // until the peer's EOF).
            port.borrow_mut().send(conn, b"bye").expect("open");
            port.borrow_mut().close(conn);
            let mut back = Vec::new();
            pump_until(&mut gw, |_| {
                let mut buf = [0u8; 16];
                c.set_nonblocking(true).expect("nonblocking");
                match c.read(&mut buf) {
                    Ok(0) => true,
                    Ok(n) => {
                        back.extend_from_slice(&buf[..n]);
                        false
                    }
                    Err(_) => false,
                }
            });
            assert_eq!(back, b"bye");
            drop(c);
        }
        pump_until_released(&mut gw, &port, conn);
    }
    // A client after all of them: its input is read.
    let (mut c, conn) = open_one(&mut gw, &port, addr);
    c.write_all(b"still read").expect("write");
    pump_until(&mut gw, |_| port.borrow().input(conn) == b"still read");
    port.borrow().verify();
}

#[test]
fn more_connections_with_input_than_buffers_are_all_read() {
    // Four provided buffers and 32 connections whose input arrives at once:
    // most receives find the ring empty (ENOBUFS ends a multishot receive);
    // each must be armed again until every byte is read.
    let (pp, mut io) = params();
    io.uring_buffers = 4;
    let (mut gw, port, addr) = setup_with(pp, &io);
    let mut clients = Vec::new();
    for _ in 0..32 {
        clients.push(open_one(&mut gw, &port, addr));
    }
    for round in 0..20u8 {
        for (c, _) in &mut clients {
            c.write_all(&[round; 600]).expect("write");
        }
        std::thread::sleep(Duration::from_millis(5));
        let mut got = vec![0usize; clients.len()];
        pump_until(&mut gw, |_| {
            let mut p = port.borrow_mut();
            for (i, (_, conn)) in clients.iter().enumerate() {
                let n = p.input(*conn).len();
                p.consume(*conn, n);
                got[i] += n;
            }
            got.iter().all(|&n| n == 600)
        });
    }
    port.borrow().verify();
}

/// Reads what a non-blocking client socket holds; true at EOF or an error.
fn drain_client(c: &mut TcpStream, got: &mut usize) -> bool {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match c.read(&mut buf) {
            Ok(0) => return true,
            Ok(n) => *got += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return true,
        }
    }
}

#[test]
fn every_goodbye_is_answered_when_the_queues_overflow() {
    // Many clients on a ring far too small for them (64 entries, a 128
    // entry completion queue, 64 buffers): input and output every round,
    // then every client says goodbye (`B`) and waits for the server's
    // answer and FIN.
    let (pp, mut io) = params();
    io.uring_entries = 64;
    let (mut gw, port, addr) = setup_with(pp, &io);
    let n = 300;
    let mut clients = Vec::new();
    for _ in 0..n {
        let c = TcpStream::connect(addr).expect("connect");
        c.set_nonblocking(true).expect("nonblocking");
        clients.push(c);
    }
    pump_until(&mut gw, |_| port.borrow().open_connections() == n);
    while port.borrow_mut().poll_event().is_some() {}
    let app = |port: &Rc<RefCell<ClientPort>>| {
        let mut p = port.borrow_mut();
        while p.poll_event().is_some() {}
        let ids: Vec<ConnId> = p.readable().collect();
        for id in ids {
            let input = p.input(id).to_vec();
            p.consume(id, input.len());
            let _ = p.send(id, &[b'v'; 700]);
            if input.contains(&b'B') {
                let _ = p.send(id, b"bye");
                p.close(id);
            }
        }
    };
    let mut got = vec![0usize; n];
    for _ in 0..50 {
        for c in &mut clients {
            let _ = c.write(&[b'm'; 40]);
        }
        gw.pump(Instant::now());
        app(&port);
        gw.pump(Instant::now());
        for (c, g) in clients.iter_mut().zip(&mut got) {
            drain_client(c, g);
        }
    }
    for c in &mut clients {
        c.write_all(b"B").expect("goodbye");
    }
    let mut ended = vec![false; n];
    let t0 = Instant::now();
    while ended.iter().any(|e| !e) && t0.elapsed() < Duration::from_secs(5) {
        gw.pump(Instant::now());
        app(&port);
        gw.pump(Instant::now());
        for ((c, g), e) in clients.iter_mut().zip(&mut got).zip(&mut ended) {
            if !*e {
                *e = drain_client(c, g);
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let left = ended.iter().filter(|e| !**e).count();
    assert_eq!(left, 0, "goodbyes unanswered");
}

#[test]
fn the_last_input_of_busy_clients_is_read_when_buffers_run_short() {
    // Clients writing all the time from another thread while the loop
    // pumps, far more of them than provided buffers (ENOBUFS every pump),
    // then each one's last byte (`B`, a goodbye) and silence: that last
    // byte must be read, though no more data comes to wake its receive.
    let (pp, mut io) = params();
    io.uring_buffers = 8;
    let (mut gw, port, addr) = setup_with(pp, &io);
    let n = 64;
    let mut clients = Vec::new();
    let mut conns = Vec::new();
    for _ in 0..n {
        let (c, conn) = open_one(&mut gw, &port, addr);
        clients.push(c);
        conns.push(conn);
    }
    let writer = std::thread::spawn(move || {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_millis(500) {
            for c in &mut clients {
                c.write_all(&[b'm'; 30]).expect("write");
            }
            std::thread::sleep(Duration::from_micros(500));
        }
        for c in &mut clients {
            c.write_all(b"B").expect("goodbye");
        }
        clients
    });
    let mut said_bye = vec![false; n];
    let t0 = Instant::now();
    while said_bye.iter().any(|b| !b) && t0.elapsed() < Duration::from_secs(5) {
        gw.pump(Instant::now());
        let mut p = port.borrow_mut();
        for (i, &conn) in conns.iter().enumerate() {
            let input = p.input(conn);
            if input.contains(&b'B') {
                said_bye[i] = true;
            }
            let len = input.len();
            p.consume(conn, len);
        }
        drop(p);
        std::thread::sleep(Duration::from_millis(2));
    }
    let _clients = writer.join().expect("writer");
    let left = said_bye.iter().filter(|b| !**b).count();
    assert_eq!(left, 0, "goodbyes never read");
}

#[test]
fn dropping_the_loop_with_receives_armed_is_safe() {
    let (mut gw, port, addr) = setup();
    let _c = TcpStream::connect(addr).expect("connect");
    pump_until(&mut gw, |_| port.borrow().open_connections() == 1);
    gw.pump(Instant::now());
    assert!(gw.conns.iter().flatten().any(Conn::busy));
    drop(gw);
}

#[test]
fn the_start_probe_passes_here_and_its_error_names_the_key_and_seccomp() {
    let (_, io) = params();
    probe(&io).expect("this kernel has what the io_uring loop needs");
    let err = UringError {
        feature: "IORING_OP_SEND",
        source: io::Error::from_raw_os_error(libc::EPERM),
    };
    let text = err.to_string();
    for want in [
        "gateway.io_backend",
        "IORING_OP_SEND",
        "seccomp",
        "6.1",
        "epoll",
    ] {
        assert!(text.contains(want), "{want} in {text}");
    }
}

/// The file at `slot` of the ring's registered file table, as the ring's
/// fdinfo shows it ("socket:[inode]"); `None` for an empty entry.
fn table_entry(gw: &UringIo, slot: u32) -> Option<String> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", gw.ring.as_raw_fd()))
        .expect("the ring's fdinfo");
    info.lines()
        .skip_while(|l| !l.starts_with("UserFiles:"))
        .skip(1)
        .take_while(|l| !l.starts_with("UserBufs:"))
        .find_map(|l| {
            let (i, file) = l.trim().split_once(": ")?;
            (i.parse::<u32>().ok()? == slot).then(|| file.to_string())
        })
}

/// What `/proc/self/fd` says the server's socket at `slot` is.
fn server_socket(gw: &UringIo, slot: u32) -> String {
    let conn = gw.conns[slot as usize]
        .as_ref()
        .expect("a socket at the slot");
    let path = std::fs::read_link(format!("/proc/self/fd/{}", conn.stream.as_raw_fd()));
    path.expect("its fd").to_string_lossy().into_owned()
}

/// One round trip each way on `conn`, marked with `round`: the client gets
/// exactly what the app sent it, the app exactly what the client wrote.
fn served(gw: &mut UringIo, port: &Rc<RefCell<ClientPort>>, c: &mut TcpStream, conn: ConnId) {
    let round = conn.generation() as u8;
    let out = [b'a'.wrapping_add(round); 20];
    port.borrow_mut().send(conn, &out).expect("open");
    pump_until(gw, |_| port.borrow().queued(conn) == 0);
    let mut back = [0u8; 20];
    c.read_exact(&mut back).expect("its own output");
    assert_eq!(back, out, "the client got its own output");
    let input = [b'A'.wrapping_add(round); 10];
    c.write_all(&input).expect("write");
    pump_until(gw, |_| port.borrow().input(conn).len() >= input.len());
    assert_eq!(port.borrow().input(conn), input, "only this client's input");
    port.borrow_mut().consume(conn, input.len());
}

/// Slot reuse, each round: a client is served, its connection ends (its
/// EOF, or the app's close with lingering, the client writing late), the
/// slot is released, and the next client takes the same slot. The old
/// client then sees EOF and nothing more; the new one only its own bytes,
/// both ways; with the file table, the slot's entry is the socket of the
/// connection that holds it and empty in between.
fn a_reused_slot_talks_to_its_new_socket_only(fixed: bool) {
    let (mut gw, port, addr) = setup();
    if !fixed {
        gw.fixed = false; // the table stays registered, empty
    }
    let (mut c, mut conn) = open_one(&mut gw, &port, addr);
    for round in 0..6 {
        if gw.fixed {
            assert_eq!(
                table_entry(&gw, conn.slot()),
                Some(server_socket(&gw, conn.slot()))
            );
        }
        served(&mut gw, &port, &mut c, conn);
        c.set_nonblocking(true).expect("nonblocking");
        let mut got = 0;
        if round % 2 == 0 {
            c.shutdown(Shutdown::Write).expect("shutdown");
            pump_until(&mut gw, |_| drain_client(&mut c, &mut got));
        } else {
            port.borrow_mut().close(conn);
            pump_until(&mut gw, |_| drain_client(&mut c, &mut got));
            c.write_all(b"late").expect("late input, discarded");
            c.shutdown(Shutdown::Write).expect("shutdown");
        }
        assert_eq!(got, 0, "nothing after the output the client read");
        pump_until_released(&mut gw, &port, conn);
        assert_eq!(table_entry(&gw, conn.slot()), None, "the entry is cleared");
        let (next, next_conn) = open_one(&mut gw, &port, addr);
        assert_eq!(next_conn.slot(), conn.slot(), "the slot is reused");
        assert_ne!(next_conn, conn);
        assert!(drain_client(&mut c, &mut got), "the old client is at EOF");
        assert_eq!(got, 0, "the old client gets nothing of the new one's");
        (c, conn) = (next, next_conn);
    }
    served(&mut gw, &port, &mut c, conn);
    port.borrow().verify();
}

#[test]
fn a_reused_slot_talks_to_its_new_socket_only_through_the_file_table() {
    a_reused_slot_talks_to_its_new_socket_only(true);
}

#[test]
fn a_reused_slot_talks_to_its_new_socket_only_by_fd() {
    a_reused_slot_talks_to_its_new_socket_only(false);
}

#[test]
fn the_file_table_is_used_from_linux_6_13() {
    for (release, at_least) in [
        ("6.18.44-fc-v669", true),
        ("6.13.0", true),
        ("7.0.1-arch1", true),
        ("6.12.9-amd64", false),
        ("6.1.0-18-amd64", false),
        ("5.19", false),
        ("garbage", false),
    ] {
        assert_eq!(release_at_least(release, (6, 13)), at_least, "{release}");
    }
}

#[test]
fn the_completion_queue_holds_a_whole_pump() {
    let p = |entries: u32, buffers: u16, files: u32| IoParams {
        backend: crate::runtime::gateway_io::IoBackend::IoUring,
        uring_entries: entries,
        uring_buffers: buffers,
        uring_buffer_bytes: 2048,
        uring_files: files,
    };
    // The defaults: 8,192 buffers + 10,000 connections + 4,096 sends.
    assert_eq!(cq_entries(&p(4096, 8192, 10_000)), 32_768);
    // Few connections: twice the submission queue, as before.
    assert_eq!(cq_entries(&p(4096, 64, 100)), 8192);
    assert_eq!(cq_entries(&p(64, 64, 10)), 256);
    // Never past the kernel's limit.
    assert_eq!(cq_entries(&p(32_768, 32_768, 100_000)), CQ_ENTRIES_MAX);
    // And the kernel takes it: a ring of the defaults' size is built.
    ring(&p(4096, 8192, 10_000)).expect("a ring with the defaults' completion queue");
}
