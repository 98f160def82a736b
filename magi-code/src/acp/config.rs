//! Model choice through ACP's session config options (stable in v1): a `model` select over
//! the catalog (`model.catalog`, every page) and an `effort` select over the current model's
//! levels, both set with `selection.set` on `session/set_config_option`.

use super::map::word;
use super::rpc::code;
use crate::client::Client;
use crate::wire::requests::{EffortLevel, EffortRequest, SelectionSetParams, SnapshotPageParams};
use crate::wire::results::{Choice, ModelCatalogResult, SelectionSetResult, Status};
use crate::wire::Call;
use serde_json::{json, Value};

/// Most catalog pages read (each bounded by the backend).
const PAGES: usize = 64;

/// What the options are built from: the session's selection and the catalog.
pub struct Options {
    selection: String,
    catalog: String,
    choices: Vec<Choice>,
    provider: String,
    model: String,
    effort: String,
    efforts: Vec<String>,
}

/// Reads the selection (`status`) and the catalog; `None` when `status` fails.
pub fn read(client: &mut Client) -> Option<Options> {
    let status: Status = client
        .call(Call::Status(crate::wire::requests::EmptyParams {}))
        .ok()?;
    let sel = status.selection?;
    let mut params = SnapshotPageParams::default();
    let (mut catalog, mut choices) = (String::new(), Vec::new());
    for _ in 0..PAGES {
        let Ok(page) = client.call::<ModelCatalogResult>(Call::ModelCatalog(params)) else {
            break;
        };
        catalog.clone_from(&page.revision);
        choices.extend(page.choices);
        match crate::client::next_page(page.revision, page.next_cursor, page.complete) {
            Some(next) => params = next,
            None => break,
        }
    }
    Some(Options {
        selection: sel.revision,
        catalog,
        choices,
        provider: sel.provider.unwrap_or_default(),
        model: sel.model.unwrap_or_default(),
        effort: word(&sel.requested_effort),
        efforts: sel.permitted_efforts.iter().map(word).collect(),
    })
}

impl Options {
    /// The `configOptions` array: the model select (the current one first when the catalog
    /// does not list it) and the effort select.
    #[must_use]
    pub fn describe(&self) -> Value {
        let current = format!("{}/{}", self.provider, self.model);
        let mut models: Vec<Value> = Vec::new();
        if !self
            .choices
            .iter()
            .any(|c| c.provider == self.provider && c.model == self.model)
        {
            models.push(json!({"value": current, "name": self.model}));
        }
        for c in &self.choices {
            let name = c.model_name.clone().unwrap_or_else(|| c.model.clone());
            models.push(json!({"value": format!("{}/{}", c.provider, c.model), "name": name}));
        }
        let mut efforts = vec![json!({"value": "default", "name": "default"})];
        efforts.extend(
            self.efforts
                .iter()
                .filter(|e| *e != "default")
                .map(|e| json!({"value": e, "name": e})),
        );
        json!([
            {"id": "model", "name": "Model", "category": "model", "type": "select",
             "currentValue": current, "options": models},
            {"id": "effort", "name": "Effort", "category": "thought_level", "type": "select",
             "currentValue": self.effort, "options": efforts}
        ])
    }

    /// `selection.set` for option `id` set to `value`; the code and words of a refusal.
    pub fn set(
        &self,
        client: &mut Client,
        sid: &str,
        id: &str,
        value: &str,
    ) -> Result<(), (i64, String)> {
        let bad = |what: &str| Err((code::INVALID_PARAMS, what.to_owned()));
        let (provider, model, effort) = match id {
            "model" => {
                let Some((p, m)) = value.split_once('/') else {
                    return bad("a model is provider/model");
                };
                if !self.choices.iter().any(|c| c.provider == p && c.model == m) {
                    return bad("that model is not in the catalog (providers.catalog.enabled)");
                }
                (p.to_owned(), m.to_owned(), EffortRequest::Keep)
            }
            "effort" => {
                let effort = match value {
                    "default" => EffortRequest::Default,
                    v => match serde_json::from_value::<EffortLevel>(json!(v)) {
                        Ok(value) => EffortRequest::Set { value },
                        Err(_) => return bad("no such effort level"),
                    },
                };
                (self.provider.clone(), self.model.clone(), effort)
            }
            _ => return bad("no such config option (model, effort)"),
        };
        let params = SelectionSetParams {
            session_id: sid.to_owned(),
            selection_revision: self.selection.clone(),
            catalog_revision: self.catalog.clone(),
            provider,
            model,
            effort: Some(effort),
        };
        match client.call::<SelectionSetResult>(Call::SelectionSet(params)) {
            Ok(_) => Ok(()),
            Err(e) => {
                let code = e.code().unwrap_or("no answer");
                Err((code::INVALID_PARAMS, crate::client::words::said(code)))
            }
        }
    }
}
