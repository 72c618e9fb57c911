//! Frames captured on an interface in a namespace (AF_PACKET through pnet), with the time
//! each was seen.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::*;

/// One captured frame with the time it was seen.
#[derive(Debug, Clone)]
pub struct Frame {
    pub at: Instant,
    pub bytes: Vec<u8>,
}

/// A capture of every frame arriving on an interface in a namespace, from a thread of this
/// test process (AF_PACKET through pnet, not promiscuous: broadcast and multicast suffice).
pub struct Capture {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Vec<Frame>>>,
}

impl Capture {
    pub fn start(ns: &Netns, dev: &str) -> Capture {
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::channel();
        let (ns_name, dev, stop2) = (ns.name.clone(), dev.to_string(), stop.clone());
        let handle = std::thread::spawn(move || {
            enter_netns(&ns_name);
            let iface = pnet_datalink::interfaces()
                .into_iter()
                .find(|i| i.name == dev)
                .expect("capture interface");
            let config = pnet_datalink::Config {
                read_timeout: Some(Duration::from_millis(10)),
                promiscuous: false,
                ..Default::default()
            };
            let pnet_datalink::Channel::Ethernet(_tx, mut rx) =
                pnet_datalink::channel(&iface, config).expect("channel")
            else {
                panic!("not ethernet")
            };
            ready_tx.send(()).unwrap();
            let mut frames = Vec::new();
            let hard_stop = Instant::now() + Duration::from_secs(120);
            while !stop2.load(Ordering::SeqCst) && Instant::now() < hard_stop {
                if let Ok(bytes) = rx.next() {
                    frames.push(Frame {
                        at: Instant::now(),
                        bytes: bytes.to_vec(),
                    });
                }
            }
            frames
        });
        ready_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("capture ready");
        Capture {
            stop,
            handle: Some(handle),
        }
    }

    pub fn finish(mut self) -> Vec<Frame> {
        self.stop.store(true, Ordering::SeqCst);
        self.handle.take().unwrap().join().expect("capture thread")
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
