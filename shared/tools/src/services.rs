use crate::files::ManagedRoot;
use minibot_agent::SpillStore;
use minibot_config::Config;
use minibot_store::Store;
use std::sync::Arc;

/// What tools may use: the configuration, the stores and the managed-file root. Cheap to clone.
#[derive(Clone)]
pub struct ToolServices {
    pub config: Arc<Config>,
    /// The transcript store; `None` in processes without conversations (workers).
    pub store: Option<Store>,
    /// The managed-file root (`[tools.file_storage]`); `None` when file storage is off.
    pub files: Option<Arc<ManagedRoot>>,
    /// What the agent really got, for `get_settings`: whoever filters or extends the tool set records the result.
    pub running: Arc<crate::runtime::Running>,
    /// The scheduled prompts store and its scheduler's wake-up, when `[scheduler.prompts]` is on and this process
    /// has chats (the orchestrator opens it: [`ToolServices::with_scheduler`]).
    pub scheduler: Option<Arc<crate::scheduler::SchedulerService>>,
    /// Databases tools open on first use, closed by [`Closers::close_all`] before the process ends.
    pub closers: Arc<Closers>,
}

type Closer = Box<dyn Fn() -> futures_util::future::BoxFuture<'static, ()> + Send + Sync>;

/// What the process closes at exit: the pools of stores that tools open lazily (memory, graph). A pool left to
/// drop hands its connections back on a task the stopping runtime may no longer run, and leaves the `-wal` and
/// `-shm` files behind.
#[derive(Default)]
pub struct Closers(std::sync::Mutex<Vec<Closer>>);

impl Closers {
    pub fn add(&self, closer: impl Fn() -> futures_util::future::BoxFuture<'static, ()> + Send + Sync + 'static) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(Box::new(closer));
    }

    pub async fn close_all(&self) {
        let closing: Vec<_> = self.0.lock().unwrap_or_else(|p| p.into_inner()).iter().map(|close| close()).collect();
        futures_util::future::join_all(closing).await;
    }
}

impl ToolServices {
    /// Builds the services, creating the managed-file root when `[tools.file_storage]` is on.
    pub fn new(config: Arc<Config>, store: Option<Store>) -> std::io::Result<Self> {
        let storage = &config.tools.file_storage;
        let files = if storage.enabled {
            let root = config.resolve_path(&storage.root_dir);
            Some(Arc::new(ManagedRoot::create(&root, storage.allow_outside_root)?))
        } else {
            None
        };
        Ok(Self { config, store, files, running: Arc::default(), scheduler: None, closers: Arc::default() })
    }

    /// Gives the main agent the scheduler tools over `service`.
    pub fn with_scheduler(mut self, service: crate::scheduler::SchedulerService) -> Self {
        self.scheduler = Some(Arc::new(service));
        self
    }

    /// The managed root as the output spill and the safety classifier's read-back use it (`None` when file
    /// storage is off): every spilled file is written, read and deleted through the root's handle.
    pub fn spill_store(&self) -> Option<Arc<dyn SpillStore>> {
        self.files.clone().map(|files| files as Arc<dyn SpillStore>)
    }
}
