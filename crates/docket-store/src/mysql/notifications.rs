//! MySQL: wake-ups, process notifications and their delivery cursors (sinks).

use super::*;
use crate::Wake;

#[async_trait]
impl crate::driver::Listen for MySqlStore {
    async fn listen(&self) -> Result<Option<tokio::sync::mpsc::Receiver<Wake>>> {
        // Only this process's changes: other processes' are seen by polling.
        Ok(Some(self.wake.listen()))
    }
}
