"""The verify operation: plan the checks for a host, run them over one SSH connection (README "How a verify runs")."""
