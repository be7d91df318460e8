"""The restore operation: plan, approval, snapshot, atomic replace, re-read as proof (README "Restore")."""
