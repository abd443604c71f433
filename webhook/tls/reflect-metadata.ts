/**
 * The three Reflect metadata functions tsyringe (used inside @peculiar/x509) checks for at import
 * time. A full polyfill package would add a dependency for code paths we never use: x509 registers
 * its services by hand and never decorates constructors. Must be imported before @peculiar/x509.
 */
type MetadataStore = WeakMap<object, Map<string | symbol | undefined, Map<unknown, unknown>>>;

interface ReflectMetadata {
  defineMetadata(key: unknown, value: unknown, target: object, property?: string | symbol): void;
  getOwnMetadata(key: unknown, target: object, property?: string | symbol): unknown;
  getMetadata(key: unknown, target: object, property?: string | symbol): unknown;
}

const reflect = Reflect as typeof Reflect & Partial<ReflectMetadata>;

if (typeof reflect.getMetadata !== 'function') {
  const store: MetadataStore = new WeakMap();
  const own = (target: object, property: string | symbol | undefined, create: boolean) => {
    let byProperty = store.get(target);
    if (!byProperty && create) store.set(target, (byProperty = new Map()));
    let map = byProperty?.get(property);
    if (!map && create) byProperty!.set(property, (map = new Map()));
    return map;
  };
  const shim: ReflectMetadata = {
    defineMetadata: (key, value, target, property) => void own(target, property, true)!.set(key, value),
    getOwnMetadata: (key, target, property) => own(target, property, false)?.get(key),
    getMetadata: (key, target, property) => {
      for (let t: object | null = target; t; t = Object.getPrototypeOf(t) as object | null) {
        const map = own(t, property, false);
        if (map?.has(key)) return map.get(key);
      }
      return undefined;
    },
  };
  Object.assign(reflect, shim);
}
