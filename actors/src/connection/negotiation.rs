//! Finding the era and keeping what was agreed: `initialize` or
//! `server/discover` (with the `auto` probe and its fallback), the log level
//! and resource subscriptions restored after a restart, the modern listen
//! stream, and the health ping.

use super::*;

/// `server/discover`s sent again after `UnsupportedProtocolVersion` answers, at most.
const MAX_VERSION_RETRIES: u8 = 2;

impl Connection {
    /// Starts the era negotiation of run `generation`: `initialize` for a
    /// legacy server; `server/discover` for a modern one, or as the probe
    /// of `era = auto` (any non-modern answer, or none within
    /// `timeouts.discover`, falls back to `initialize` on the same process).
    pub(super) fn negotiate(&mut self, generation: u64, ctx: &mut Context<Self>) {
        match (self.config.era, self.detected_era) {
            (ConfiguredEra::Legacy, _) | (ConfiguredEra::Auto, Some(Era::Legacy)) => self.send_initialize(generation, ctx),
            (ConfiguredEra::Modern, _) | (ConfiguredEra::Auto, Some(Era::Modern)) => self.send_discover(generation, false, ctx),
            (ConfiguredEra::Auto, None) => self.send_discover(generation, true, ctx),
        }
    }

    fn send_initialize(&mut self, generation: u64, ctx: &mut Context<Self>) {
        self.session.agree(Era::Legacy, protocol::LATEST_LEGACY_VERSION);
        let params = serde_json::json!({
            "protocolVersion": protocol::LATEST_LEGACY_VERSION,
            "capabilities": self.session.capabilities(),
            "clientInfo": self.session.client_info(),
        });
        let answer = self.request(methods::INITIALIZE, &params, ctx);
        self.when_answered(generation, answer, "the initialize answer", ctx, |act, outcome, ctx| act.on_initialize(outcome, ctx));
    }

    fn on_initialize(&mut self, outcome: Outcome, ctx: &mut Context<Self>) {
        let server = self.config.name.clone();
        let init = match outcome.and_then(|raw| parse::<serde_json::Value>(&raw).map_err(Failure::internal)) {
            Ok(init) => init,
            // A dual-era server that a late `server/discover` already made
            // modern refuses `initialize`: under `auto`, speak modern.
            Err(Failure::Rpc(error))
                if error.code == error_codes::UNSUPPORTED_PROTOCOL_VERSION && self.config.era != ConfiguredEra::Legacy =>
            {
                let supported = supported_versions(error.data.as_ref().and_then(|d| d.get("supported")));
                if let Some(version) = supported.iter().find(|v| protocol::is_modern_version(v)) {
                    tracing::debug!(server = %server, "initialize refused for {version}; switching to the modern era");
                    self.session.agree(Era::Modern, version.clone());
                    let generation = self.generation;
                    return self.send_discover(generation, false, ctx);
                }
                let failure = Failure::Rpc(error);
                return self.abort_run(failure.into_connect_error(&server, methods::INITIALIZE), Ending::Failure);
            }
            Err(failure) => return self.abort_run(failure.into_connect_error(&server, methods::INITIALIZE), Ending::Failure),
        };
        let version = match init.get("protocolVersion") {
            Some(serde_json::Value::String(version)) => version.clone(),
            _ => {
                let message = match &init {
                    serde_json::Value::Object(_) => {
                        "the answer has no protocolVersion (a string naming the version the server agreed to)".to_string()
                    }
                    other => format!(
                        "the answer is {}, not an object with protocolVersion, capabilities and serverInfo",
                        protocol::json_kind(other)
                    ),
                };
                let error = ConnectError::MalformedHandshake { server, method: methods::INITIALIZE.into(), message };
                return self.abort_run(error, Ending::Failure);
            }
        };
        if !protocol::is_supported_legacy_version(&version) {
            let error =
                ConnectError::UnsupportedVersion { server, got: version, supported: protocol::SUPPORTED_LEGACY_VERSIONS.join(", ") };
            return self.abort_run(error, Ending::Failure);
        }
        tracing::debug!(server = %self.name(), version, "initialized");
        self.session.agree(Era::Legacy, version.clone());
        self.peer = Some(Peer::from_answer(Era::Legacy, version, &init));
        self.notify(methods::INITIALIZED, &serde_json::json!({}), ctx);
        self.on_negotiated(ctx);
    }

    fn send_discover(&mut self, generation: u64, probe: bool, ctx: &mut Context<Self>) {
        let version = self.session_version_to_try();
        self.session.agree(Era::Modern, version);
        let (id, answer) = self.request_with_id(methods::DISCOVER, &serde_json::json!({}), ctx);
        if let Some(run) = self.run.as_mut() {
            run.probing = Some(id.clone());
        }
        if probe {
            self.later(self.config.timeouts.discover, "the server/discover time-out", ctx, move |act, ctx| {
                if act.current_run(generation).is_some_and(|run| run.probing.as_ref() == Some(&id)) {
                    act.calls.take(&id);
                    let after = act.config.timeouts.discover;
                    act.fall_back(generation, format!("no answer to server/discover within {after:?}"), ctx);
                }
            });
        }
        self.when_answered(generation, answer, "the server/discover answer", ctx, move |act, outcome, ctx| {
            if act.run.as_ref().is_some_and(|run| run.probing.is_some()) {
                act.on_discover(generation, outcome, probe, ctx);
            }
        });
    }

    /// The modern version to offer: the one a server asked for in a -32022
    /// retry, else the newest this client speaks.
    fn session_version_to_try(&self) -> String {
        match self.session.era() {
            Era::Modern if protocol::is_modern_version(self.session.version()) => self.session.version().to_string(),
            _ => protocol::MODERN_VERSIONS[0].to_string(),
        }
    }

    fn on_discover(&mut self, generation: u64, outcome: Outcome, probe: bool, ctx: &mut Context<Self>) {
        let server = self.config.name.clone();
        let discovered = outcome.and_then(|raw| parse::<serde_json::Value>(&raw).map_err(Failure::internal));
        let answer = match discovered {
            Ok(answer) => answer,
            Err(Failure::Rpc(error)) if error.code == error_codes::UNSUPPORTED_PROTOCOL_VERSION => {
                let supported = supported_versions(error.data.as_ref().and_then(|d| d.get("supported")));
                let tried = self.session.version().to_string();
                let retries = self.current_run(generation).map_or(MAX_VERSION_RETRIES, |run| run.version_retries);
                // Another version it supports first; the one tried again once, when it is
                // the only one listed (a refusal need not mean the version itself was wrong).
                let modern: Vec<&String> = supported.iter().filter(|v| protocol::is_modern_version(v)).collect();
                let next = modern.iter().find(|v| ***v != tried).or_else(|| modern.first()).filter(|_| retries < MAX_VERSION_RETRIES);
                return match next {
                    Some(version) => {
                        if let Some(run) = self.current_run(generation) {
                            run.version_retries += 1;
                        }
                        self.session.agree(Era::Modern, (*version).clone());
                        self.send_discover(generation, probe, ctx);
                    }
                    None => self.not_modern(generation, probe, format!("it supports {}", supported.join(", ")), ctx),
                };
            }
            // A server known to be modern (not a probe) that refuses for a reason of
            // its own (busy, an internal error) may take it at the next try: the
            // restart policy decides, rather than failing for good as a wrong era.
            Err(Failure::Rpc(error)) if !probe && error.code != error_codes::METHOD_NOT_FOUND => {
                return self.abort_run(Failure::Rpc(error).into_connect_error(&server, methods::DISCOVER), Ending::Failure);
            }
            Err(Failure::Rpc(error)) => {
                return self.not_modern(generation, probe, format!("server/discover: error {}: {}", error.code, error.message), ctx)
            }
            Err(failure) => return self.abort_run(failure.into_connect_error(&server, methods::DISCOVER), Ending::Failure),
        };
        let supported = supported_versions(answer.get("supportedVersions"));
        let Some(version) = protocol::MODERN_VERSIONS.iter().find(|v| supported.iter().any(|s| s == *v)) else {
            return self.not_modern(generation, probe, format!("server/discover lists versions {}", supported.join(", ")), ctx);
        };
        if let Some(run) = self.run.as_mut() {
            run.probing = None;
        }
        tracing::debug!(server = %server, version, "discovered a modern server");
        self.session.agree(Era::Modern, *version);
        self.detected_era = Some(Era::Modern);
        self.peer = Some(Peer::from_answer(Era::Modern, version.to_string(), &answer));
        self.on_negotiated(ctx);
    }

    /// The server is not modern: a probe falls back to `initialize`; a
    /// server configured `era = modern` fails with the reason.
    fn not_modern(&mut self, generation: u64, probe: bool, reason: String, ctx: &mut Context<Self>) {
        if probe {
            return self.fall_back(generation, reason, ctx);
        }
        let error = ConnectError::UnsupportedVersion {
            server: self.config.name.clone(),
            got: reason,
            supported: format!(
                "{} (era = modern; set era = \"auto\" or \"legacy\" to use initialize)",
                protocol::MODERN_VERSIONS.join(", ")
            ),
        };
        self.abort_run(error, Ending::Failure);
    }

    fn fall_back(&mut self, generation: u64, reason: String, ctx: &mut Context<Self>) {
        tracing::debug!(server = %self.config.name, "not a modern server ({reason}); falling back to initialize");
        if let Some(run) = self.current_run(generation) {
            run.probing = None;
        }
        self.detected_era = Some(Era::Legacy);
        self.send_initialize(generation, ctx);
    }

    /// The era is agreed: restore the log level and subscriptions of
    /// earlier runs, list what the server offers, then serve.
    fn on_negotiated(&mut self, ctx: &mut Context<Self>) {
        if let Some(run) = self.run.as_mut() {
            run.negotiated = true;
        }
        if let Some(level) = self.log_level {
            self.apply_log_level(level, ctx);
        }
        match self.session.era() {
            Era::Legacy => {
                for uri in self.subscriptions.clone() {
                    // Nobody waits for the answer: a refusal is logged when it arrives unmatched.
                    drop(self.request(methods::RESOURCES_SUBSCRIBE, &serde_json::json!({ "uri": uri }), ctx));
                }
            }
            Era::Modern => self.listen(ctx),
        }
        let peer = self.peer.clone();
        for what in [Listing::Tools, Listing::Resources, Listing::Prompts] {
            let offered = what == Listing::Tools || peer.as_ref().is_some_and(|peer| peer.has(what.capability(), None));
            match offered {
                true => self.list(what, ctx),
                false => self.on_listed_count(what, Some(0), ctx),
            }
        }
    }

    /// Legacy: `logging/setLevel`; modern: the level rides on every request.
    fn apply_log_level(&mut self, level: LogLevel, ctx: &mut Context<Self>) -> Option<oneshot::Receiver<Outcome>> {
        self.log_level = Some(level);
        match self.session.era() {
            Era::Modern => {
                self.session.set_log_level(level.as_str());
                None
            }
            Era::Legacy => Some(self.request(methods::SET_LOG_LEVEL, &serde_json::json!({ "level": level.as_str() }), ctx)),
        }
    }

    /// Modern servers: (re)opens the `subscriptions/listen` stream for the
    /// list changes the server announces and the subscribed resources.
    fn listen(&mut self, ctx: &mut Context<Self>) {
        let Some(peer) = self.peer.clone() else { return };
        if let Some(old) = self.run.as_mut().and_then(|run| run.listen.take()) {
            self.calls.take(&old);
            self.notify(methods::CANCELLED, &serde_json::json!({ "requestId": old, "reason": "subscriptions changed" }), ctx);
        }
        let mut filter = serde_json::Map::new();
        for (capability, key) in [("tools", "toolsListChanged"), ("prompts", "promptsListChanged"), ("resources", "resourcesListChanged")] {
            if peer.has(capability, Some("listChanged")) {
                filter.insert(key.into(), true.into());
            }
        }
        if !self.subscriptions.is_empty() {
            filter.insert("resourceSubscriptions".into(), self.subscriptions.iter().cloned().collect());
        }
        if filter.is_empty() {
            return;
        }
        let (id, answer) = self.request_with_id(methods::SUBSCRIPTIONS_LISTEN, &serde_json::json!({ "notifications": filter }), ctx);
        if let Some(run) = self.run.as_mut() {
            run.listen = Some(id);
        }
        let server = self.config.name.clone();
        actix_rt::spawn(async move {
            if let Ok(Err(failure)) = answer.await {
                let ended = failure.into_call_error(&server, methods::SUBSCRIPTIONS_LISTEN);
                tracing::debug!(server = %server, "the listen stream ended: {ended}");
            }
        });
    }

    /// Subscribes to or unsubscribes from a resource's updates.
    fn set_subscription(&mut self, uri: String, subscribe: bool, ctx: &mut Context<Self>) -> Reply<Result<(), CallError>> {
        let method = if subscribe { methods::RESOURCES_SUBSCRIBE } else { methods::RESOURCES_UNSUBSCRIBE };
        let (server, label) = (self.config.name.clone(), format!("{method} {uri}"));
        if self.peer.as_ref().is_some_and(|peer| !peer.has("resources", Some("subscribe"))) {
            return Reply::Ready(Err(CallError::Unsupported { server, tool: label, capability: "resource subscriptions".into() }));
        }
        let changed = if subscribe { self.subscriptions.insert(uri.clone()) } else { self.subscriptions.remove(&uri) };
        if self.session.era() == Era::Modern {
            if changed && self.run.as_ref().is_some_and(|run| run.ready) {
                self.listen(ctx);
            }
            return Reply::Ready(Ok(()));
        }
        let answer = self.caller_request(label, method, &serde_json::json!({ "uri": uri }), Default::default(), ctx);
        Reply::later(async move { answer.await.map(|_| ()) })
    }

    /// With `timeouts.health_ping` set, pings the server every interval; a
    /// ping without an answer within the call time-out restarts the server
    /// (an error answer counts as alive).
    pub(super) fn schedule_health_ping(&mut self, generation: u64, ctx: &mut Context<Self>) {
        let Some(every) = self.config.timeouts.health_ping else { return };
        self.later(every, "the health ping", ctx, move |act, ctx| {
            if act.current_run(generation).is_none() {
                return;
            }
            let limit = act.config.timeouts.call;
            let (id, answer) = act.request_with_id(methods::PING, &serde_json::json!({}), ctx);
            let ping = async move { tokio::time::timeout(limit, answer).await };
            act.after(ping, "the health ping's answer", ctx, move |act, outcome, ctx| {
                if act.current_run(generation).is_none() {
                    return;
                }
                match outcome {
                    Ok(Ok(Ok(_) | Err(Failure::Rpc(_)))) => act.schedule_health_ping(generation, ctx),
                    Ok(_) => {}
                    Err(_) => {
                        // The ping is given up on: it leaves the books now, not when the run ends.
                        act.calls.take(&id);
                        let message = format!("no answer to the health ping within {limit:?}; restarting it");
                        act.abort_run(
                            ConnectError::Protocol { server: act.config.name.clone(), method: methods::PING.into(), message },
                            Ending::Failure,
                        );
                    }
                }
            });
        });
    }
}

/// What a server told about itself at connect (`initialize` or `server/discover`).
#[derive(Debug, Clone)]
pub(super) struct Peer {
    pub(super) era: Era,
    pub(super) version: String,
    /// "name version" from `serverInfo` (modern: also `_meta`).
    pub(super) info: Option<String>,
    pub(super) capabilities: serde_json::Value,
}

impl Connection {
    /// `Unsupported` for `method` when the connected server did not announce
    /// `capability`; `None` when it did, or has not connected yet (a request
    /// then waits for it like a call).
    pub(crate) fn unannounced(&self, capability: &str, method: &str) -> Option<CallError> {
        let announced = self.peer.as_ref().is_none_or(|peer| peer.has(capability, None));
        (!announced).then(|| CallError::Unsupported {
            server: self.config.name.clone(),
            tool: method.into(),
            capability: capability.into(),
        })
    }

    /// As [`Connection::unannounced`], for an extension the server must
    /// name in `capabilities.extensions` (SEP-2133), e.g. the skills one.
    pub(crate) fn unannounced_extension(&self, extension: &str, method: &str) -> Option<CallError> {
        let announced = self.peer.as_ref().is_none_or(|peer| peer.capabilities["extensions"].get(extension).is_some_and(|e| !e.is_null()));
        (!announced).then(|| CallError::Unsupported {
            server: self.config.name.clone(),
            tool: method.into(),
            capability: format!("the {extension} extension"),
        })
    }
}

impl Peer {
    fn from_answer(era: Era, version: String, answer: &serde_json::Value) -> Peer {
        let info = answer
            .get("serverInfo")
            .or_else(|| answer.pointer("/_meta/io.modelcontextprotocol~1serverInfo"))
            .and_then(|info| {
                Some(format!("{} {}", info.get("name")?.as_str()?, info.get("version").and_then(|v| v.as_str()).unwrap_or("")))
            })
            .map(|info| info.trim_end().to_string());
        Peer { era, version, info, capabilities: answer.get("capabilities").cloned().unwrap_or_default() }
    }

    /// Whether the server announced `capability` (e.g. "resources"), or one
    /// of its flags (e.g. "resources", "subscribe").
    fn has(&self, capability: &str, flag: Option<&str>) -> bool {
        let Some(entry) = self.capabilities.get(capability).filter(|c| !c.is_null()) else { return false };
        flag.is_none_or(|flag| entry.get(flag).and_then(|f| f.as_bool()).unwrap_or(false))
    }
}

/// The versions named in a `supportedVersions` or error `data.supported` list.
fn supported_versions(list: Option<&serde_json::Value>) -> Vec<String> {
    let items = list.and_then(|l| l.as_array()).map(Vec::as_slice).unwrap_or_default();
    items.iter().filter_map(|v| v.as_str().map(str::to_string)).collect()
}

impl Handler<SubscribeResource> for Connection {
    type Result = Reply<Result<(), CallError>>;

    fn handle(&mut self, msg: SubscribeResource, ctx: &mut Context<Self>) -> Self::Result {
        let label = format!("{} {}", methods::RESOURCES_SUBSCRIBE, msg.uri);
        self.guarded_reply(&label, ctx, |act, ctx| act.set_subscription(msg.uri, true, ctx))
    }
}

impl Handler<UnsubscribeResource> for Connection {
    type Result = Reply<Result<(), CallError>>;

    fn handle(&mut self, msg: UnsubscribeResource, ctx: &mut Context<Self>) -> Self::Result {
        let label = format!("{} {}", methods::RESOURCES_UNSUBSCRIBE, msg.uri);
        self.guarded_reply(&label, ctx, |act, ctx| act.set_subscription(msg.uri, false, ctx))
    }
}

impl Handler<RootsChanged> for Connection {
    type Result = Result<(), CallError>;

    fn handle(&mut self, _: RootsChanged, ctx: &mut Context<Self>) -> Self::Result {
        let tool = methods::ROOTS_LIST_CHANGED;
        let done = self.guarded(tool, ctx, |act, ctx| {
            // A server that is not up yet asks for the roots when it needs them.
            if act.run.as_ref().is_some_and(|run| run.ready) {
                act.notify(methods::ROOTS_LIST_CHANGED, &serde_json::json!({}), ctx);
            }
        });
        done.map_err(|panic| Failure::internal(panic).into_call_error(&self.config.name, tool))
    }
}

impl Handler<SetLogLevel> for Connection {
    type Result = Reply<Result<(), CallError>>;

    fn handle(&mut self, SetLogLevel(level): SetLogLevel, ctx: &mut Context<Self>) -> Self::Result {
        self.guarded_reply(methods::SET_LOG_LEVEL, ctx, |act, ctx| act.set_log_level(level, ctx))
    }
}

impl Connection {
    fn set_log_level(&mut self, level: LogLevel, ctx: &mut Context<Self>) -> Reply<Result<(), CallError>> {
        let server = self.config.name.clone();
        // Modern servers take the level with each request, announced or not.
        if self.peer.as_ref().is_some_and(|peer| peer.era == Era::Legacy && !peer.has("logging", None)) {
            let tool = methods::SET_LOG_LEVEL.to_string();
            return Reply::Ready(Err(CallError::Unsupported { server, tool, capability: "logging".into() }));
        }
        if !self.run.as_ref().is_some_and(|run| run.ready) {
            // Applied once the server is up (see `on_negotiated`).
            self.log_level = Some(level);
            return Reply::Ready(Ok(()));
        }
        let Some(answer) = self.apply_log_level(level, ctx) else { return Reply::Ready(Ok(())) };
        Reply::later(async move {
            flatten(answer.await).map(|_| ()).map_err(|failure| failure.into_call_error(&server, methods::SET_LOG_LEVEL))
        })
    }
}
