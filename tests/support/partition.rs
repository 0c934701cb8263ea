//! A network partition between one host and PostgreSQL: a TCP relay the host's connections go
//! through, which can be cut — every byte in flight and after is swallowed, both ways, and the
//! connections stay open and silent, as behind a pulled cable — and healed: the connections
//! opened before the heal are then closed (the peers see them end, as TCP keepalives or a
//! reconnect would end them) and new ones are relayed again.

use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The relay, on a thread and runtime of its own (a test that blocks its own runtime on an
/// artisan command must not stall the host's traffic); dropped, it stops and closes everything.
pub struct Partition {
    /// Where the host connects instead of PostgreSQL's port.
    port: u16,
    /// The cut state: `true` while cut. Each connection's task watches it.
    cut: watch::Sender<bool>,
    /// Bumped at each heal (and at drop): connections of an earlier generation are closed.
    generation: watch::Sender<u64>,
    /// Set at drop: the relay's runtime ends.
    stop: watch::Sender<bool>,
}

impl Partition {
    /// A relay on a free local port to PostgreSQL at 127.0.0.1:`upstream`.
    pub fn start(upstream: u16) -> Partition {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        std_listener.set_nonblocking(true).unwrap();
        let port = std_listener.local_addr().unwrap().port();
        let (cut, _) = watch::channel(false);
        let (generation, _) = watch::channel(0u64);
        let (stop, mut stopped) = watch::channel(false);
        let to = SocketAddr::from(([127, 0, 0, 1], upstream));
        let (cut_rx, gen_rx) = (cut.subscribe(), generation.subscribe());
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = TcpListener::from_std(std_listener).unwrap();
                loop {
                    tokio::select! {
                        accepted = listener.accept() => {
                            let Ok((client, _)) = accepted else { return };
                            tokio::spawn(relay(client, to, cut_rx.clone(), gen_rx.clone()));
                        }
                        _ = stopped.wait_for(|s| *s) => return,
                    }
                }
            });
        });
        Partition {
            port,
            cut,
            generation,
            stop,
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Swallow everything from now on, both ways.
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    /// Close every connection made so far and relay new ones again.
    pub fn heal(&self) {
        self.generation.send_modify(|g| *g += 1);
        self.cut.send_replace(false);
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        self.heal();
        self.stop.send_replace(true);
    }
}

/// One connection: relayed while not cut; once cut (or accepted while cut), held silent until
/// the next heal, then closed.
async fn relay(
    mut client: TcpStream,
    to: SocketAddr,
    mut cut: watch::Receiver<bool>,
    mut generation: watch::Receiver<u64>,
) {
    let born = *generation.borrow_and_update();
    if !*cut.borrow_and_update() {
        let Ok(mut server) = TcpStream::connect(to).await else {
            return;
        };
        tokio::select! {
            _ = tokio::io::copy_bidirectional(&mut client, &mut server) => return,
            _ = cut.wait_for(|c| *c) => {}
        }
        // Cut: both sockets stay open, nothing moves, until the heal closes them.
        let _ = generation.wait_for(|g| *g > born).await;
        drop(server);
        return;
    }
    let _ = generation.wait_for(|g| *g > born).await;
    drop(client);
}
