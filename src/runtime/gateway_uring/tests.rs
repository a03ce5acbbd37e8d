//! The io_uring loop's unsafe parts exercised directly: the provided buffer
//! ring filled, consumed by multishot receives and refilled many times over
//! (more receives than buffers), sends from the connections' own buffers,
//! back-pressure through the spill, and a drop with operations in flight.

use super::*;
use crate::shard::port::{PortEvent, PortParams};
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
    };
    (port, io)
}

fn setup() -> (UringIo, Rc<RefCell<ClientPort>>, SocketAddr) {
    let (pp, io) = params();
    let (listener, addr) =
        crate::runtime::gateway_io::bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
    let port = Rc::new(RefCell::new(ClientPort::attached(pp)));
    let handoffs = Arc::new(Handoffs::new(1, 4));
    let gw = UringIo::start(listener, port.clone(), (handoffs, 0), &io).expect("io_uring here");
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
