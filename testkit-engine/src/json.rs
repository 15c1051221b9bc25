//! JSON files the engine wrote (a trace, a history), read back.

use std::path::Path;

/// Why a JSON file the engine wrote (a trace, a history) could not be read
/// back.
#[derive(Debug, thiserror::Error)]
pub enum ReadJsonError {
    /// The file could not be read.
    #[error("cannot read the {what} {}", path.display())]
    Read {
        /// What the file holds ("trace", "history").
        what: &'static str,
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not JSON of its kind.
    #[error("the {what} {} does not parse", path.display())]
    Parse {
        /// What the file holds ("trace", "history").
        what: &'static str,
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

/// Reads the JSON file `path`, which holds a `what`.
pub fn read_json<T: serde::de::DeserializeOwned>(
    path: &Path,
    what: &'static str,
) -> Result<T, ReadJsonError> {
    let text = std::fs::read_to_string(path).map_err(|source| ReadJsonError::Read {
        what,
        path: path.to_owned(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| ReadJsonError::Parse {
        what,
        path: path.to_owned(),
        source,
    })
}
