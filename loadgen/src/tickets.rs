//! Login tickets of the bots: the key of the run and one ticket per bot.
//!
//! The embedded server gets a key generated for the run (a file in the
//! temporary directory, removed when the run ends), so the README's one
//! line runs with `gateway.auth = "hmac"`; against `--server`, the key is
//! the server's own (`--key-file`), or none for a server with
//! `auth = "none"`. Owns nothing else.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use tessera::config::Config;
use tessera::server::gateway::{mint, TicketKey};

/// How long a bot's ticket is valid (well within the server's
/// `gateway.ticket_ttl_max_s` default of 600 s).
pub const TICKET_TTL: Duration = Duration::from_secs(300);

/// A key file that is removed when dropped.
#[derive(Debug)]
pub struct KeyFile {
    path: PathBuf,
}

impl KeyFile {
    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for KeyFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Generates a key for the embedded server of this run, writes it to a
/// private file and turns `auth = "hmac"` on in `config`.
///
/// # Errors
/// No randomness, or the file cannot be written.
pub fn embedded_key(config: &mut Config) -> anyhow::Result<(TicketKey, KeyFile)> {
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes).map_err(|e| anyhow::anyhow!("random key: {e}"))?;
    let key = TicketKey::from_hex(&hex::encode(bytes)).context("a 32-byte key")?;
    let path = std::env::temp_dir().join(format!("loadgen-key-{}.hex", std::process::id()));
    write_private(&path, &key.to_hex()).with_context(|| format!("writing {}", path.display()))?;
    config.gateway.auth = "hmac".to_owned();
    config.gateway.key_file = path.display().to_string();
    Ok((key, KeyFile { path }))
}

fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(text.as_bytes())
}

/// The key in `path` (a remote server's, `--key-file`).
///
/// # Errors
/// Unreadable, or not a key.
pub fn read_key(path: &Path) -> anyhow::Result<TicketKey> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    TicketKey::from_hex(&text).with_context(|| format!("the key in {}", path.display()))
}

/// A ticket for bot `i` logging in as `account`, valid for [`TICKET_TTL`].
pub fn bot_ticket(key: &TicketKey, account: &str, i: u32) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    mint(key, account, now + TICKET_TTL.as_secs(), u64::from(i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_key_turns_hmac_on_and_its_tickets_verify() {
        let mut config = Config::default();
        let (key, file) = embedded_key(&mut config).expect("key");
        assert_eq!(config.gateway.auth, "hmac");
        let server_key = config
            .gateway
            .ticket_key()
            .expect("readable")
            .expect("hmac");
        let t = bot_ticket(&key, "bot7", 7);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("after 1970")
            .as_secs();
        let (ticket, _) = server_key.verify(t.as_bytes(), now, 600).expect("valid");
        assert_eq!(ticket.account, "bot7");
        let path = file.path().to_owned();
        drop(file);
        assert!(!path.exists(), "removed with the run");
    }
}
