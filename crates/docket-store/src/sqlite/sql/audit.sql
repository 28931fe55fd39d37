-- The audit log of operator actions.

