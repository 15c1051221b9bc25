//! Persistent state under HOME: identity (name and token), sessions and
//! sandboxes (`sandboxes/<name>/{meta.json,root/,logs/}`).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::http::StatusCode;
use serde::{Deserialize, Serialize};

use crate::api::{CreateSandbox, Sandbox, SandboxState};
use crate::error::{ApiError, ApiResult};

/// How long a session lasts.
pub(crate) const SESSION_TTL: Duration = Duration::from_secs(2 * 60 * 60);
const MAX_SESSIONS: usize = 100_000;

/// Unix milliseconds now.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// `len` random characters from `A-Za-z0-9-_`.
pub(crate) fn random_id(len: usize) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut bytes = vec![0u8; len];
    getrandom::fill(&mut bytes).expect("the OS random source failed");
    bytes
        .iter()
        .map(|b| ALPHABET[(*b & 63) as usize] as char)
        .collect()
}

fn random_lower(len: usize) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut bytes = vec![0u8; len];
    getrandom::fill(&mut bytes).expect("the OS random source failed");
    bytes
        .iter()
        .map(|b| ALPHABET[(*b as usize) % ALPHABET.len()] as char)
        .collect()
}

/// Writes `data` to `path` atomically (temp file + rename), mode 0600.
pub(crate) fn write_atomic(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp-{}", random_lower(8)));
    {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(data)?;
        f.sync_all().ok();
    }
    std::fs::rename(&tmp, path)
}

#[derive(Serialize, Deserialize)]
struct Identity {
    name: String,
    token: String,
}

struct Inner {
    map: BTreeMap<String, Sandbox>,
    /// Snapshots for `list-lag`, oldest first.
    history: VecDeque<(Instant, Arc<Vec<Sandbox>>)>,
}

/// Everything persistent.
pub(crate) struct Store {
    home: PathBuf,
    pub(crate) name: String,
    token: String,
    sessions: Mutex<HashMap<String, u64>>,
    inner: Mutex<Inner>,
    list_lag: Option<Duration>,
}

impl Store {
    /// Opens (or initialises) HOME. Returns the store and the names of sandboxes left in `deleting`.
    /// `token`, when given (`--token-env`), replaces the identity's token for
    /// this run only: the one kept in HOME stays as it was.
    pub(crate) fn open(
        home: &Path,
        list_lag: Option<Duration>,
        token: Option<String>,
    ) -> std::io::Result<(Arc<Self>, Vec<String>)> {
        std::fs::create_dir_all(home.join("sandboxes"))?;
        let home = home.canonicalize()?;
        let id_path = home.join("identity.json");
        let identity = match std::fs::read(&id_path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Identity>(&b).ok())
        {
            Some(id) => id,
            None => {
                let id = Identity {
                    name: format!("sandboxd-{}", random_lower(8)),
                    token: random_id(43),
                };
                write_atomic(&id_path, &serde_json::to_vec(&id).expect("serialisable"))?;
                id
            }
        };
        let now = now_ms();
        let mut sessions = HashMap::new();
        if let Ok(text) = std::fs::read_to_string(home.join("sessions.log")) {
            for line in text.lines() {
                if let Some((id, exp)) = line.split_once(' ') {
                    if let Ok(exp) = exp.parse::<u64>() {
                        if exp > now {
                            sessions.insert(id.to_string(), exp);
                        }
                    }
                }
            }
        }
        let compact: String = sessions
            .iter()
            .map(|(id, exp)| format!("{id} {exp}\n"))
            .collect();
        write_atomic(&home.join("sessions.log"), compact.as_bytes())?;

        let mut map = BTreeMap::new();
        let mut deleting = Vec::new();
        for e in std::fs::read_dir(home.join("sandboxes"))?.flatten() {
            let dir = e.path();
            let meta = std::fs::read(dir.join("meta.json"))
                .ok()
                .and_then(|b| serde_json::from_slice::<Sandbox>(&b).ok());
            match meta {
                Some(sb) if dir.file_name().and_then(|n| n.to_str()) == Some(sb.name.as_str()) => {
                    if sb.state == SandboxState::Deleting {
                        deleting.push(sb.name.clone());
                    }
                    map.insert(sb.name.clone(), sb);
                }
                // A create that never finished, or debris: remove it.
                _ => {
                    let _ = std::fs::remove_dir_all(&dir);
                }
            }
        }
        let store = Store {
            home,
            name: identity.name,
            token: token.unwrap_or(identity.token),
            sessions: Mutex::new(sessions),
            inner: Mutex::new(Inner {
                map,
                history: VecDeque::new(),
            }),
            list_lag,
        };
        {
            let mut inner = store.inner.lock().unwrap();
            store.snapshot(&mut inner);
        }
        Ok((Arc::new(store), deleting))
    }

    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    /// Whether `id` is a live session.
    pub(crate) fn session_valid(&self, id: &str) -> bool {
        let now = now_ms();
        self.sessions
            .lock()
            .unwrap()
            .get(id)
            .is_some_and(|exp| *exp > now)
    }

    /// Opens a new session and persists it; returns its id.
    pub(crate) fn new_session(&self) -> String {
        let id = random_id(43);
        let exp = now_ms() + SESSION_TTL.as_millis() as u64;
        let mut s = self.sessions.lock().unwrap();
        let now = now_ms();
        if s.len() >= MAX_SESSIONS {
            s.retain(|_, e| *e > now);
            if s.len() >= MAX_SESSIONS {
                if let Some(oldest) = s.iter().min_by_key(|(_, e)| **e).map(|(k, _)| k.clone()) {
                    s.remove(&oldest);
                }
            }
        }
        s.insert(id.clone(), exp);
        let line = format!("{id} {exp}\n");
        let res = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(self.home.join("sessions.log"))
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = res {
            eprintln!("sandboxd: warning: cannot persist a session: {e}");
        }
        id
    }

    fn dir(&self, name: &str) -> PathBuf {
        self.home.join("sandboxes").join(name)
    }

    /// The directory commands run in and files live in.
    pub(crate) fn root(&self, name: &str) -> PathBuf {
        self.dir(name).join("root")
    }

    /// Where background processes' output goes (outside the root).
    pub(crate) fn logs(&self, name: &str) -> PathBuf {
        self.dir(name).join("logs")
    }

    fn persist(&self, sb: &Sandbox) -> std::io::Result<()> {
        write_atomic(
            &self.dir(&sb.name).join("meta.json"),
            &serde_json::to_vec_pretty(sb).expect("serialisable"),
        )
    }

    fn snapshot(&self, inner: &mut Inner) {
        let Some(lag) = self.list_lag else { return };
        let now = Instant::now();
        inner
            .history
            .push_back((now, Arc::new(inner.map.values().cloned().collect())));
        // Keep the newest snapshot that is at least `lag` old and everything after it.
        while inner.history.len() > 1 && now.duration_since(inner.history[1].0) >= lag {
            inner.history.pop_front();
        }
    }

    /// Creates a sandbox: 409 if it exists, 429 at `max`.
    pub(crate) fn create(&self, req: CreateSandbox, max: Option<usize>) -> ApiResult<Sandbox> {
        let mut inner = self.inner.lock().unwrap();
        if inner.map.contains_key(&req.name) {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "already_exists",
                format!("sandbox {:?} already exists", req.name),
            ));
        }
        if let Some(max) = max {
            if inner.map.len() >= max {
                return Err(ApiError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "limit_reached",
                    format!("the limit of {max} sandboxes is reached (deleting sandboxes count until they are gone)"),
                ));
            }
        }
        let sb = Sandbox {
            name: req.name,
            labels: req.labels,
            env: req.env,
            state: SandboxState::Ready,
            created_at: now_ms(),
        };
        let dir = self.dir(&sb.name);
        let made = std::fs::create_dir_all(dir.join("root"))
            .and_then(|_| std::fs::create_dir_all(dir.join("logs")))
            .and_then(|_| self.persist(&sb));
        if let Err(e) = made {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(ApiError::internal(format!(
                "cannot create the sandbox directory: {e}"
            )));
        }
        inner.map.insert(sb.name.clone(), sb.clone());
        self.snapshot(&mut inner);
        Ok(sb)
    }

    pub(crate) fn get(&self, name: &str) -> Option<Sandbox> {
        self.inner.lock().unwrap().map.get(name).cloned()
    }

    /// Current sandboxes, or as they were `list-lag` ago.
    pub(crate) fn list_view(&self) -> Arc<Vec<Sandbox>> {
        let mut inner = self.inner.lock().unwrap();
        match self.list_lag {
            None => Arc::new(inner.map.values().cloned().collect()),
            Some(lag) => {
                let now = Instant::now();
                while inner.history.len() > 1 && now.duration_since(inner.history[1].0) >= lag {
                    inner.history.pop_front();
                }
                Arc::clone(&inner.history.front().expect("one snapshot at least").1)
            }
        }
    }

    /// Marks a sandbox `deleting`; true if it was not already.
    pub(crate) fn mark_deleting(&self, name: &str) -> ApiResult<bool> {
        let mut inner = self.inner.lock().unwrap();
        let Some(sb) = inner.map.get_mut(name) else {
            return Err(ApiError::no_sandbox(name));
        };
        if sb.state == SandboxState::Deleting {
            return Ok(false);
        }
        sb.state = SandboxState::Deleting;
        let sb = sb.clone();
        if let Err(e) = self.persist(&sb) {
            eprintln!("sandboxd: warning: cannot persist the deleting state of {name}: {e}");
        }
        self.snapshot(&mut inner);
        Ok(true)
    }

    /// Forgets the sandbox without removing its directory (fault
    /// `keep-dirs-on-delete`): its record goes, so that the API says it is
    /// gone, and `root/` and `logs/` stay on disk, found by nothing but a
    /// look at HOME. (A restart takes the directory for debris of a create
    /// that never finished, and removes it.)
    pub(crate) fn forget(&self, name: &str) {
        let meta = self.dir(name).join("meta.json");
        if let Err(e) = std::fs::remove_file(&meta) {
            if e.kind() != std::io::ErrorKind::NotFound {
                eprintln!("sandboxd: warning: cannot remove {}: {e}", meta.display());
            }
        }
        let mut inner = self.inner.lock().unwrap();
        inner.map.remove(name);
        self.snapshot(&mut inner);
    }

    /// Removes the sandbox directory, then the record.
    pub(crate) fn remove(&self, name: &str) {
        let dir = self.dir(name);
        // The record goes only once the directory is gone (meta.json last, so a
        // crash mid-way leaves a `deleting` sandbox that the next start finishes).
        let _ = std::fs::remove_dir_all(dir.join("root"));
        let _ = std::fs::remove_dir_all(dir.join("logs"));
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            if e.kind() != std::io::ErrorKind::NotFound {
                eprintln!("sandboxd: warning: cannot remove {}: {e}", dir.display());
            }
        }
        let mut inner = self.inner.lock().unwrap();
        inner.map.remove(name);
        self.snapshot(&mut inner);
    }
}
