"""The restart operation: plan, approval, act, then prove new PID, health, flags, a real request (README "Restart")."""
