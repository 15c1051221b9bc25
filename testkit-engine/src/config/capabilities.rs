//! `[capabilities]` of `testkit.toml`: where the pod's capabilities come
//! from.

use serde::Deserialize;

use super::Problem;

/// `[capabilities]` of `testkit.toml`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct CapabilitiesSection {
    /// An endpoint that lists them (sent with the credential).
    #[serde(default)]
    pub request: Option<String>,
    /// The JSON pointer of its array of strings.
    #[serde(default = "default_capabilities_pointer")]
    pub pointer: String,
    /// Declared here.
    #[serde(default)]
    pub list: Vec<String>,
}

impl CapabilitiesSection {
    /// None: no endpoint, nothing declared. A suite that writes its own
    /// `[auth]` but no `[capabilities]` has these: its service is not
    /// `sandboxd`, whose endpoint it would otherwise be asked.
    pub fn none() -> CapabilitiesSection {
        CapabilitiesSection {
            request: None,
            pointer: default_capabilities_pointer(),
            list: Vec::new(),
        }
    }

    /// `sandboxd`'s: `GET /api/capabilities`, `/capabilities`.
    pub fn sandboxd() -> CapabilitiesSection {
        CapabilitiesSection {
            request: Some("GET /api/capabilities".to_owned()),
            pointer: default_capabilities_pointer(),
            list: Vec::new(),
        }
    }
}

impl CapabilitiesSection {
    pub(super) fn validate(&self) -> Result<(), Problem> {
        if let Some(request) = &self.request {
            crate::template::RequestTemplate::parse(request)
                .map_err(|p| ("capabilities.request", p.to_string()))?;
            if !self.pointer.starts_with('/') {
                return Err((
                    "capabilities.pointer",
                    format!(
                        "is {:?}: expected a JSON pointer, e.g. \"/capabilities\"",
                        self.pointer
                    ),
                ));
            }
        }
        Ok(())
    }
}

fn default_capabilities_pointer() -> String {
    "/capabilities".to_owned()
}
