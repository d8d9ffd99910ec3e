"""Nightly scheduling: cron forms (`cron`), the local crontab (`crontab`) and KFP (`kfp_client`)."""
