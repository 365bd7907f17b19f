// Connected devices by Device-Id. A device that reconnects replaces its older connection.
import { canonicalDeviceId } from '../protocol/index.js';

export interface RegisteredDevice {
  readonly deviceId: string;
  readonly sessionId: string;
  readonly connectedAt: number;
  close(code: number, reason: string): void;
}

export class DeviceRegistry<T extends RegisteredDevice = RegisteredDevice> {
  private readonly devices = new Map<string, T>();

  add(device: T): void {
    const previous = this.devices.get(device.deviceId);
    this.devices.set(device.deviceId, device);
    if (previous && previous !== device) previous.close(4001, 'replaced by a newer connection');
  }

  /** Removes the device only if this exact connection is still the registered one. */
  remove(device: T): void {
    if (this.devices.get(device.deviceId) === device) this.devices.delete(device.deviceId);
  }

  get(deviceId: string): T | undefined {
    return this.devices.get(canonicalDeviceId(deviceId));
  }

  /** The named device, or the only/first connected one when no id is given. */
  pick(deviceId?: string): T | undefined {
    if (deviceId) return this.get(deviceId);
    return this.devices.values().next().value;
  }

  list(): T[] {
    return [...this.devices.values()];
  }

  get size(): number {
    return this.devices.size;
  }
}
