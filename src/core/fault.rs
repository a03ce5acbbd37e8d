//! Faults injected on purpose on the server's data path (config
//! `testing.fault`), so tests can show that the client's checks and
//! loadgen's rules catch a broken server.
//!
//! Owns [`Fault`], a plain value: the config layer turns the key's text into
//! it once at start, and the observer ([`crate::core::view::ObserverParams`])
//! and the gateway session carry it in their params, so the hot path reads an
//! enum, never a string. `tessera` refuses any fault but
//! [`Fault::None`] unless started with `--allow-faults`.

/// One named fault (see the module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Fault {
    /// No fault: the server as shipped.
    #[default]
    None,
    /// Observers send no Leave events (handles are still freed and reused):
    /// the client sees a handle entered twice or an entity shown twice.
    DropLeave,
    /// Observers send every update with the previous version: the client
    /// sees a stale (or repeated) version.
    StaleVersion,
    /// After Welcome the gateway sends no view batches.
    Silence,
    /// The gateway sends no input acknowledgements.
    DropAck,
}

impl Fault {
    /// Every fault, [`Fault::None`] first.
    pub const ALL: [Fault; 5] = [
        Fault::None,
        Fault::DropLeave,
        Fault::StaleVersion,
        Fault::Silence,
        Fault::DropAck,
    ];

    /// The name used in the config (`testing.fault`).
    pub fn name(self) -> &'static str {
        match self {
            Fault::None => "none",
            Fault::DropLeave => "drop-leave",
            Fault::StaleVersion => "stale-version",
            Fault::Silence => "silence",
            Fault::DropAck => "drop-ack",
        }
    }

    /// The fault named `name`, if any.
    pub fn from_name(name: &str) -> Option<Fault> {
        Fault::ALL.into_iter().find(|f| f.name() == name)
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for f in Fault::ALL {
            assert_eq!(Fault::from_name(f.name()), Some(f));
        }
        assert_eq!(Fault::from_name("drop_leave"), None);
        assert_eq!(Fault::default(), Fault::None);
    }
}
