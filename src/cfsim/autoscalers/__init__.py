"""Kubernetes autoscalers as upstream computes them: the VPA (recommender, updater, admission) and
the HPA. Each module is small and mostly pure functions; the facts and their sources are in
``shared/reference/vpa-hpa.md`` (kubernetes/autoscaler ``vertical-pod-autoscaler/`` and
kubernetes/kubernetes ``pkg/controller/podautoscaler``)."""
