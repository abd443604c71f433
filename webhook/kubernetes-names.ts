/**
 * The name rules Kubernetes applies, checked before the API server would: a container, namespace,
 * Service or Secret named against them is refused here, naming the setting and the fix.
 */

/** An RFC 1123 label: container, namespace and Service names. */
export const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** An RFC 1123 subdomain, at most 253 characters: Secret and ConfigMap names, claims. Labels joined by dots. */
export const DNS_SUBDOMAIN = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
