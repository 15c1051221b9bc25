//! The guard: what ends a machine's processes and removes its files when
//! the process that owns them cannot (it gave up, panicked, or was
//! SIGKILLed).
//!
//! A guard is a small `sh` started in a process group of its own before
//! anything it guards, so that the group is known (and can be told to a
//! watchdog) before QEMU or a build command starts: each of those is then
//! started *into* that group. The guard reads a pipe only the owner holds
//! the write end of. `release` on it means the owner has ended and removed
//! everything itself; the pipe closing without it means the owner is gone
//! or gave up: the guard then, from a session of its own (so that its kill
//! does not end it), SIGKILLs the whole group, waits (bounded) until no
//! member but zombies is left, and removes the guarded directory.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncWriteExt;

use super::MachineError;

/// The guard's script: `$1` is the directory it removes.
const GUARD_SCRIPT: &str = r#"dir=$1
while read -r word; do
    if [ "$word" = release ]; then exit 0; fi
done
exec setsid sh -c '
g=$1 dir=$2 n=0
members() {
    for s in /proc/[0-9]*/stat; do
        read -r line 2>/dev/null <"$s" || continue
        set -- ${line##*") "}
        if [ "$3" = "$g" ] && [ "$1" != Z ]; then return 0; fi
    done
    return 1
}
kill -s KILL -- "-$g" 2>/dev/null
while members && [ "$n" -lt 100 ]; do
    kill -s KILL -- "-$g" 2>/dev/null
    sleep 0.1
    n=$((n + 1))
done
rm -rf -- "$dir"
' killer "$$" "$dir"
"#;

/// How long a released guard may take to exit.
const RELEASE_WAIT: Duration = Duration::from_secs(5);

/// A running guard (see the module docs). Dropping it without
/// [`Guard::release`] closes its pipe: the group is killed and the
/// directory removed.
#[derive(Debug)]
pub(crate) struct Guard {
    child: tokio::process::Child,
    pipe: Option<tokio::process::ChildStdin>,
    pgid: i32,
    start_ticks: Option<u64>,
    dir: PathBuf,
}

impl Guard {
    /// Starts a guard of `dir` in a new process group.
    pub(crate) fn start(dir: &Path) -> Result<Guard, MachineError> {
        let mut cmd = tokio::process::Command::new("sh");
        cmd.arg("-c")
            .arg(GUARD_SCRIPT)
            .arg("testkit-machine-guard")
            .arg(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(false);
        let (mut child, pgid) = crate::process::spawn_in_group(&mut cmd)
            .map_err(MachineError::io("start the guard of", dir))?;
        let pipe = child.stdin.take();
        Ok(Guard {
            start_ticks: crate::process::start_ticks(pgid),
            child,
            pipe,
            pgid,
            dir: dir.to_owned(),
        })
    }

    /// The group every guarded process is started into.
    pub(crate) fn pgid(&self) -> i32 {
        self.pgid
    }

    /// The guard's start time (clock ticks since boot), against pid reuse.
    pub(crate) fn start_ticks(&self) -> Option<u64> {
        self.start_ticks
    }

    /// A command that starts in the guard's group, with no stdin and every
    /// signal at its default.
    pub(crate) fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(program);
        cmd.process_group(self.pgid)
            .stdin(Stdio::null())
            .kill_on_drop(false);
        crate::process::default_signals(&mut cmd);
        cmd
    }

    /// The owner has ended and removed everything itself: the guard exits
    /// without touching anything. A guard that is gone already (someone
    /// ended its group) is no error: it can touch nothing either.
    pub(crate) async fn release(mut self) -> Result<(), MachineError> {
        if let Some(mut pipe) = self.pipe.take() {
            let told = pipe.write_all(b"release\n").await;
            drop(pipe);
            if let Err(e) = told {
                if !matches!(self.child.try_wait(), Ok(Some(_))) {
                    return Err(MachineError::io("release the guard of", &self.dir)(e));
                }
            }
        }
        match tokio::time::timeout(RELEASE_WAIT, self.child.wait()).await {
            Ok(Ok(_)) => Ok(()),
            _ => Err(MachineError::Survived(format!(
                "the guard (pid {}) did not exit within {RELEASE_WAIT:?} of its release",
                self.pgid
            ))),
        }
    }

    /// Gives up: the guard kills the group and removes the directory; this
    /// waits (up to `limit`) until the directory is gone.
    pub(crate) async fn abandon(mut self, limit: Duration) -> Result<(), MachineError> {
        self.pipe.take();
        let _ = tokio::time::timeout(limit, self.child.wait()).await;
        let gone = super::poll_until(limit, || !self.dir.exists()).await;
        if gone {
            Ok(())
        } else {
            Err(MachineError::Survived(format!(
                "{} was still there {limit:?} after its guard was told to remove it",
                self.dir.display()
            )))
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        // Closing the pipe is the whole of it: the guard does the rest,
        // whether or not this process lives on.
        self.pipe.take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alive(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            !matches!(
                s.rsplit(") ").next().and_then(|r| r.chars().next()),
                Some('Z')
            )
        })
    }

    /// Starts a guard of a fresh dir with a `sleep` in its group.
    async fn guarded() -> (tempfile::TempDir, PathBuf, Guard, tokio::process::Child) {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("run");
        let guard = Guard::start(&dir).unwrap();
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("overlay"), b"x").unwrap();
        let sleeper = guard.command("sleep").arg("600").spawn().unwrap();
        (parent, dir, guard, sleeper)
    }

    #[tokio::test]
    async fn a_dropped_guard_ends_its_group_and_removes_its_dir() {
        let (_parent, dir, guard, sleeper) = guarded().await;
        let pid = sleeper.id().unwrap() as i32;
        assert_eq!(crate::process::group_members(guard.pgid()).len(), 2);
        drop(guard);
        let gone =
            super::super::poll_until(Duration::from_secs(10), || !alive(pid) && !dir.exists())
                .await;
        assert!(
            gone,
            "sleep alive: {}, dir there: {}",
            alive(pid),
            dir.exists()
        );
    }

    #[tokio::test]
    async fn releasing_a_guard_someone_ended_is_no_error() {
        let (_parent, _dir, guard, mut sleeper) = guarded().await;
        let pgid = guard.pgid();
        crate::process::signal_group(pgid, nix::sys::signal::Signal::SIGKILL);
        let _ = sleeper.wait().await;
        assert!(
            super::super::poll_until(Duration::from_secs(10), || {
                crate::process::group_members(pgid).is_empty()
            })
            .await
        );
        guard.release().await.unwrap();
    }

    #[tokio::test]
    async fn a_released_guard_touches_nothing() {
        let (_parent, dir, guard, mut sleeper) = guarded().await;
        guard.release().await.unwrap();
        assert!(dir.join("overlay").is_file());
        assert!(
            sleeper.try_wait().unwrap().is_none(),
            "the release ended the group"
        );
        sleeper.kill().await.unwrap();
    }
}
