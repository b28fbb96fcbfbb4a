"""Kubernetes autoscalers as upstream computes them: the VPA (recommender, updater, admission) and
the HPA. Each module is small and mostly pure functions and names the upstream files it follows.

References
----------
kubernetes/autoscaler ``vertical-pod-autoscaler/``,
https://github.com/kubernetes/autoscaler/tree/master/vertical-pod-autoscaler; kubernetes/kubernetes
``pkg/controller/podautoscaler``, https://github.com/kubernetes/kubernetes/tree/master/pkg/controller/podautoscaler;
"Horizontal Pod Autoscaling", https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/.
All sources: ``docs/references.md``.
"""
