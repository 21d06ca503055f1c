"""Talking to endpoints: the pooled client, request protocols, inference jobs, launched servers, replicas."""
